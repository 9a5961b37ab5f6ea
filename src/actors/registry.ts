/**
 * Actors by key: get-or-spawn with one shared in-flight creation per key (two callers asking
 * for the same cold actor get the same instance), and idle unload. An actor is unloaded only
 * when it reports it may be (no connections, no pending work) and has been idle for `idleMs`.
 */
export interface Actor {
  /** True when nothing holds the actor: no queued messages, no attached clients. */
  canUnload(): boolean;
  /** Last time the actor did or received anything (ms since epoch). */
  idleSince(): number;
  stop(): Promise<void>;
}

export interface RegistryOptions {
  idleMs: number;
  /** How often idle actors are looked for; 0 turns the sweeper off. */
  sweepMs?: number;
}

export class ActorRegistry<A extends Actor> {
  readonly #actors = new Map<string, A>();
  readonly #creating = new Map<string, Promise<A>>();
  readonly #spawn: (key: string) => Promise<A> | A;
  readonly #idleMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(spawn: (key: string) => Promise<A> | A, opts: RegistryOptions) {
    this.#spawn = spawn;
    this.#idleMs = opts.idleMs;
    const sweepMs = opts.sweepMs ?? Math.max(1000, Math.floor(opts.idleMs / 2));
    if (sweepMs > 0) {
      this.#timer = setInterval(() => void this.sweep(), sweepMs);
      this.#timer.unref?.();
    }
  }

  get size(): number {
    return this.#actors.size;
  }

  peek(key: string): A | undefined {
    return this.#actors.get(key);
  }

  keys(): IterableIterator<string> {
    return this.#actors.keys();
  }

  async get(key: string): Promise<A> {
    const live = this.#actors.get(key);
    if (live) return live;
    const inFlight = this.#creating.get(key);
    if (inFlight) return inFlight;
    // The spawn may fail synchronously; the in-flight entry is removed only after it was set.
    const creation = Promise.resolve()
      .then(() => this.#spawn(key))
      .then((actor) => {
        this.#actors.set(key, actor);
        return actor;
      });
    this.#creating.set(key, creation);
    creation.then(
      () => this.#creating.delete(key),
      () => this.#creating.delete(key),
    );
    return creation;
  }

  /** Unloads actors idle for longer than `idleMs`; returns the keys unloaded. */
  async sweep(now = Date.now()): Promise<string[]> {
    const gone: string[] = [];
    for (const [key, actor] of this.#actors) {
      if (actor.canUnload() && now - actor.idleSince() >= this.#idleMs) {
        this.#actors.delete(key);
        gone.push(key);
        await actor.stop();
      }
    }
    return gone;
  }

  /** Drops one actor now, whatever its state (used when its subject is deleted). */
  async evict(key: string): Promise<void> {
    const actor = this.#actors.get(key);
    if (!actor) return;
    this.#actors.delete(key);
    await actor.stop();
  }

  async stopAll(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    const all = [...this.#actors.values()];
    this.#actors.clear();
    await Promise.all(all.map((a) => a.stop()));
  }
}
