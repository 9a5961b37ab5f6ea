/**
 * The error log of a loop that retries against the database (scheduler, scheduled actions,
 * dispatcher): while the database is away every tick fails the same way, so it logs the first
 * failure, then at most one line per interval saying how many it left out, and one line when the
 * loop works again. The log's rate stays bounded however fast the loop ticks.
 */
export class FailureLog {
  readonly #label: string;
  readonly #everyMs: number;
  readonly #now: () => number;
  #lastAt = Number.NEGATIVE_INFINITY;
  #skipped = 0;
  #failing = false;

  constructor(label: string, everyMs = 60_000, now: () => number = Date.now) {
    this.#label = label;
    this.#everyMs = everyMs;
    this.#now = now;
  }

  /** Lines written so far, and failures heard (tests). */
  lines = 0;
  failures = 0;

  fail(err: unknown): void {
    this.#failing = true;
    this.failures++;
    const t = this.#now();
    if (t - this.#lastAt < this.#everyMs) {
      this.#skipped++;
      return;
    }
    const more = this.#skipped ? ` (and ${this.#skipped} more since the last line)` : '';
    this.#lastAt = t;
    this.#skipped = 0;
    this.lines++;
    console.error(`${this.#label}: ${err instanceof Error ? err.message : String(err)}${more}`);
  }

  ok(): void {
    if (!this.#failing) return;
    this.#failing = false;
    this.#lastAt = Number.NEGATIVE_INFINITY;
    this.#skipped = 0;
    this.lines++;
    console.error(`${this.#label}: working again`);
  }
}
