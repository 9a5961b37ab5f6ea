/**
 * Actors by key, each in one of three states (as hocuspocus keeps its documents):
 *  - loading: being spawned; concurrent callers share the one in-flight creation;
 *  - live: in the map, served to callers;
 *  - unloading: being stopped (idle sweep or evict); a get() waits for the stop to finish and
 *    then spawns a fresh actor, so two instances of one key never run side by side.
 * Attachments count the holders that need an actor kept (a WebSocket in a room, a channel
 * subscriber): an attached actor is never swept. An actor is unloaded only when nothing is
 * attached, it reports it may be (no pending work), and it has been idle for `idleMs`.
 */
export interface Actor {
  /** True when nothing holds the actor: no queued messages, no pending work. */
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

export type ActorState = 'loading' | 'live' | 'unloading';

/** A hold on a live actor; `release()` once when done (further calls do nothing). */
export interface Attachment<A> {
  actor: A;
  release(): void;
}

export class ActorRegistry<A extends Actor> {
  readonly #actors = new Map<string, A>();
  readonly #creating = new Map<string, Promise<A>>();
  readonly #unloading = new Map<string, Promise<void>>();
  readonly #attached = new Map<string, number>();
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

  /** Live actors. */
  get size(): number {
    return this.#actors.size;
  }

  peek(key: string): A | undefined {
    return this.#actors.get(key);
  }

  keys(): IterableIterator<string> {
    return this.#actors.keys();
  }

  stateOf(key: string): ActorState | undefined {
    if (this.#unloading.has(key)) return 'unloading';
    if (this.#actors.has(key)) return 'live';
    return this.#creating.has(key) ? 'loading' : undefined;
  }

  /** How many actors are in each state (metrics). */
  counts(): Record<ActorState, number> {
    return { loading: this.#creating.size, live: this.#actors.size, unloading: this.#unloading.size };
  }

  attachments(key: string): number {
    return this.#attached.get(key) ?? 0;
  }

  async get(key: string): Promise<A> {
    const live = this.#actors.get(key);
    if (live) return live;
    const inFlight = this.#creating.get(key);
    if (inFlight) return inFlight;
    const creation = (async () => {
      // A stop in progress finishes before its successor starts (state is saved first).
      const stopping = this.#unloading.get(key);
      if (stopping) await stopping;
      const actor = await this.#spawn(key);
      this.#actors.set(key, actor);
      return actor;
    })();
    this.#creating.set(key, creation);
    creation.then(
      () => this.#creating.delete(key),
      () => this.#creating.delete(key),
    );
    return creation;
  }

  /** Gets (or spawns) the actor and holds it live until `release()`. */
  async attach(key: string): Promise<Attachment<A>> {
    // Counted before the await, so a sweep running meanwhile sees the hold.
    this.#attached.set(key, this.attachments(key) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const n = this.attachments(key) - 1;
      if (n > 0) this.#attached.set(key, n);
      else this.#attached.delete(key);
    };
    try {
      return { actor: await this.get(key), release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Unloads actors idle for longer than `idleMs` with nothing attached; returns the keys. */
  async sweep(now = Date.now()): Promise<string[]> {
    const gone: string[] = [];
    for (const [key, actor] of this.#actors) {
      if (this.attachments(key) === 0 && actor.canUnload() && now - actor.idleSince() >= this.#idleMs) {
        gone.push(key);
        await this.#unload(key, actor);
      }
    }
    return gone;
  }

  /** Drops one actor now, whatever its state (used when its subject is deleted). */
  async evict(key: string): Promise<void> {
    const actor = this.#actors.get(key);
    if (actor) await this.#unload(key, actor);
    else await this.#unloading.get(key);
  }

  #unload(key: string, actor: A): Promise<void> {
    this.#actors.delete(key);
    const stopping = actor.stop().finally(() => this.#unloading.delete(key));
    this.#unloading.set(key, stopping);
    return stopping;
  }

  async stopAll(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    const all = [...this.#actors.entries()];
    await Promise.all([...all.map(([key, a]) => this.#unload(key, a)), ...this.#unloading.values()]);
  }
}
