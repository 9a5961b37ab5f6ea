/**
 * The actor primitive: a mailbox whose messages are handled one at a time, in arrival order.
 * `ask` resolves with the handler's reply; a handler that throws rejects that message's
 * promise only, and the mailbox goes on with the next message.
 */
export type Handler<M, R> = (message: M) => R | Promise<R>;

interface Envelope<M, R> {
  message: M;
  resolve: (reply: R) => void;
  reject: (err: unknown) => void;
}

export class Mailbox<M, R = void> {
  readonly #queue: Envelope<M, R>[] = [];
  readonly #handler: Handler<M, R>;
  #running = false;
  #closed = false;
  #lastActivity = Date.now();
  #idleWaiters: (() => void)[] = [];

  constructor(handler: Handler<M, R>) {
    this.#handler = handler;
  }

  /** Sends a message and waits for the handler's reply. */
  ask(message: M): Promise<R> {
    if (this.#closed) return Promise.reject(new Error('actor stopped'));
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ message, resolve, reject });
      this.#lastActivity = Date.now();
      if (!this.#running) void this.#drain();
    });
  }

  /** Sends a message without waiting; a failure is reported to `onError`. */
  tell(message: M, onError: (err: unknown) => void = () => {}): void {
    this.ask(message).catch(onError);
  }

  /** Messages queued or in flight. */
  get pending(): number {
    return this.#queue.length + (this.#running ? 1 : 0);
  }

  get idleSince(): number {
    return this.pending > 0 ? Date.now() : this.#lastActivity;
  }

  /** Resolves once every message sent so far has been handled. */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((r) => this.#idleWaiters.push(r));
  }

  /** Refuses new messages; the ones already queued are still handled. */
  close(): Promise<void> {
    this.#closed = true;
    return this.idle();
  }

  async #drain(): Promise<void> {
    this.#running = true;
    while (this.#queue.length > 0) {
      const env = this.#queue.shift()!;
      try {
        env.resolve(await this.#handler(env.message));
      } catch (err) {
        env.reject(err);
      }
    }
    this.#running = false;
    this.#lastActivity = Date.now();
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }
}
