/**
 * A room's autosave debounce: a save `debounceMs` after the last change, at most `maxWaitMs`
 * after the first unsaved one. One timer per quiet period, not one per keystroke: when it fires
 * early it re-arms for the rest.
 */
export class SaveTimer {
  readonly #debounceMs: number;
  readonly #maxWaitMs: number;
  readonly #due: () => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the unsaved changes must be saved at the latest (the `maxWaitMs` cap). */
  #deadline = 0;
  #lastChangeAt = 0;
  #stopped = false;

  constructor(debounceMs: number, maxWaitMs: number, due: () => void) {
    this.#debounceMs = debounceMs;
    this.#maxWaitMs = maxWaitMs;
    this.#due = due;
  }

  /** A change: the save is due after the debounce (or the cap). */
  changed(): void {
    if (this.#stopped) return;
    const now = Date.now();
    this.#lastChangeAt = now;
    if (this.#timer !== undefined) return;
    // The cap is spread over its last fifth: rooms that started typing together (a reconnect
    // storm, a bench) do not all save in the same instant.
    this.#deadline = now + this.#maxWaitMs * (0.8 + 0.2 * Math.random());
    // The cap may come first (a debounce configured longer than the cap).
    this.#arm(Math.min(this.#debounceMs, this.#deadline - now));
  }

  #arm(delay: number): void {
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        if (this.#stopped) return;
        const due = Math.min(this.#lastChangeAt + this.#debounceMs, this.#deadline);
        const wait = due - Date.now();
        if (wait > 0) return this.#arm(wait);
        this.#due();
      },
      Math.max(0, delay),
    );
    this.#timer.unref?.();
  }

  /** A save runs now: the pending timer is not needed. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  stop(): void {
    this.#stopped = true;
    this.cancel();
  }
}
