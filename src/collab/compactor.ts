import type { CompactJob, CompactReply, CompactResult } from './compactor-worker.ts';

export type { CompactResult } from './compactor-worker.ts';

/**
 * Compactions of rooms' stored documents, run by one worker thread (compactor-worker.ts) with a
 * connection of its own. A compaction is an optimisation, never needed for durability (the state
 * plus the log is the document, compacted or not), so every failure ends in "skipped, tried again
 * later" and never waits on anything:
 *
 * - every request has a timeout: past it the worker is taken as stuck, terminated, and the next
 *   request starts a new one (a stuck merge cannot hold the rooms or shutdown);
 * - a worker that dies (an error, an exit) fails its request the same way and is replaced on the
 *   next request;
 * - a room whose compaction failed is not tried again for `retryMs`;
 * - `close()` gives the request in flight a bounded time to commit, then terminates the worker.
 *
 * One request at a time (the worker merges one document at a time anyway), one per room: a
 * second request for a room being compacted shares the first's answer.
 */
export interface CompactorOptions {
  /** The database the worker connects to. */
  url: string;
  /** How long one compaction may take before the worker is taken as stuck (ms; 60 s). */
  timeoutMs?: number;
  /** How long a room whose compaction failed waits before the next try (ms; 30 s). */
  retryMs?: number;
  /** The worker's script (tests give one that hangs); compactor-worker.ts by default. */
  workerUrl?: URL;
  /** An idle worker is ended after this long (ms; 30 s): its thread and heap cost ~50 MB of RSS. */
  idleMs?: number;
}

interface Pending {
  room: string;
  resolve(r: CompactResult | null): void;
  timer: ReturnType<typeof setTimeout>;
}

export class Compactor {
  readonly #opts: Required<Omit<CompactorOptions, 'workerUrl'>> & { workerUrl: URL };
  #worker: Worker | undefined;
  readonly #pending = new Map<number, Pending>();
  readonly #inflight = new Map<string, Promise<CompactResult | null>>();
  readonly #retryAt = new Map<string, number>();
  #chain: Promise<unknown> = Promise.resolve();
  #nextId = 0;
  #closed = false;
  /** Counters for GET /metrics and tests. */
  readonly stats = { compactions: 0, lost: 0, failures: 0, workers: 0 };

  constructor(opts: CompactorOptions) {
    this.#opts = {
      url: opts.url,
      timeoutMs: opts.timeoutMs ?? 60_000,
      retryMs: opts.retryMs ?? 30_000,
      workerUrl: opts.workerUrl ?? new URL('./compactor-worker.ts', import.meta.url),
      idleMs: opts.idleMs ?? 30_000,
    };
  }

  #idle: ReturnType<typeof setTimeout> | undefined;

  /**
   * A worker with nothing to do is ended after `idleMs`: compactions come seldom (a room per 200
   * saves or 1 MiB of log), and a worker that merged a 4 MiB document held ~50 MB of RSS
   * (bench/collab-big-save.ts: 154 MB against 104 MB without it). The next request starts one.
   */
  #rest(): void {
    clearTimeout(this.#idle);
    if (this.#pending.size > 0 || !this.#worker) return;
    const worker = this.#worker;
    this.#idle = setTimeout(() => {
      if (this.#worker === worker && this.#pending.size === 0) {
        this.#worker = undefined;
        worker.terminate();
      }
    }, this.#opts.idleMs);
    this.#idle.unref?.();
  }

  /**
   * Compacts the room's stored document; null when skipped (closed, failed or timed out, backing
   * off after a failure, nothing to merge). Never rejects.
   */
  compact(room: string): Promise<CompactResult | null> {
    if (this.#closed || (this.#retryAt.get(room) ?? 0) > Date.now()) return Promise.resolve(null);
    const running = this.#inflight.get(room);
    if (running) return running;
    const p = new Promise<CompactResult | null>((resolve) => {
      this.#chain = this.#chain.then(() => (this.#closed ? resolve(null) : this.#send(room).then(resolve)));
    }).finally(() => this.#inflight.delete(room));
    this.#inflight.set(room, p);
    return p;
  }

  /** Whether a compaction of the room is queued or running. */
  busy(room: string): boolean {
    return this.#inflight.has(room);
  }

  #send(room: string): Promise<CompactResult | null> {
    return new Promise((resolve) => {
      clearTimeout(this.#idle);
      const worker = this.#spawn();
      const id = ++this.#nextId;
      const timer = setTimeout(
        () => this.#fail(worker, `compaction of ${room} took over ${this.#opts.timeoutMs} ms`),
        this.#opts.timeoutMs,
      );
      timer.unref?.();
      this.#pending.set(id, { room, resolve, timer });
      worker.postMessage({ id, url: this.#opts.url, room } satisfies CompactJob);
    });
  }

  #spawn(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(this.#opts.workerUrl);
    // Never the reason a process stays alive.
    worker.unref();
    this.stats.workers++;
    worker.onmessage = (e: MessageEvent<CompactReply>) => this.#reply(e.data);
    worker.onerror = (e) => this.#fail(worker, `compactor failed: ${e.message}`);
    worker.addEventListener('close', () => this.#fail(worker, 'compactor exited'));
    this.#worker = worker;
    return worker;
  }

  #reply(r: CompactReply): void {
    const p = this.#pending.get(r.id);
    if (!p) return;
    this.#pending.delete(r.id);
    clearTimeout(p.timer);
    if ('error' in r) {
      console.error(`collab compaction of ${p.room} failed: ${r.error}`);
      this.stats.failures++;
      this.#retryAt.set(p.room, Date.now() + this.#opts.retryMs);
      p.resolve(null);
      this.#rest();
      return;
    }
    this.#retryAt.delete(p.room);
    if (r.result?.won) this.stats.compactions++;
    else if (r.result) this.stats.lost++;
    p.resolve(r.result);
    this.#rest();
  }

  /** The worker is stuck or gone: end it, skip what it held (tried again later), start afresh. */
  #fail(worker: Worker, reason: string): void {
    if (this.#worker !== worker) return;
    this.#worker = undefined;
    worker.terminate();
    if (this.#pending.size > 0) {
      if (!this.#closed) console.error(`collab: ${reason}; compaction skipped, tried again later`);
      this.stats.failures++;
    }
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      this.#retryAt.set(p.room, Date.now() + this.#opts.retryMs);
      p.resolve(null);
    }
    this.#pending.clear();
  }

  /** Ends the worker now, as a crash would (tests, diagnostics). */
  kill(): void {
    if (this.#worker) this.#fail(this.#worker, 'compactor killed');
  }

  /**
   * Shutdown, after the rooms' final saves: the compaction in flight gets `graceMs` to commit (it
   * changes nothing if it does not), then the worker is terminated.
   */
  async close(graceMs = 2_000): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#idle);
    const running = [...this.#inflight.values()];
    if (running.length > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.all(running), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
    if (this.#worker) this.#fail(this.#worker, 'closing');
  }
}
