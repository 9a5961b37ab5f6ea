import { connectContentSql, type ContentSql, type Sql } from './db.ts';
import { formatLsn, parseLsn } from './lsn.ts';
import { Replica, RoutedReads, LiveReads, type ReplicaState } from './routed-reads.ts';
import { withDeadline } from './tick.ts';

/**
 * Content reads from PostgreSQL streaming replicas (`DATABASE_READ_URL`, docs/scaling.md).
 *
 * Every `pollMs` one poll per process (never per request) asks the primary for its WAL position
 * (`pg_current_wal_lsn()`) and each replica for how far it has replayed
 * (`pg_last_wal_replay_lsn()`). A replica's lag is how long ago the primary had first written WAL
 * the replica has not replayed yet (0 when it has replayed everything the primary had at the
 * last poll). Over `maxLagMs`, or unreachable, a replica leaves rotation; it comes back once its
 * lag is under half the bound again.
 *
 * Read-your-writes: every change this process hears of (its own commits with their exact LSN,
 * other processes' through the bus with the position the relay stamped) raises its project's
 * *floor*; a published read of the project uses a replica only once that replica has replayed
 * past the floor (and past an LSN the client presented, `x-svc-lsn`). A change heard without an
 * LSN reads from the primary until the next poll, whose primary position is then the floor.
 * Deciding costs a map lookup and a compare per request: no query.
 */
export interface ReplicaOptions {
  urls: string[];
  /** Out of rotation past this lag (SVC_REPLICA_MAX_LAG_MS). */
  maxLagMs: number;
  /** Replay positions are polled this often (SVC_REPLICA_POLL_MS). */
  pollMs: number;
  /** How long a read that needs a later position waits for a replica before the primary (SVC_REPLICA_WAIT_MS). */
  waitMs: number;
  /** Connections per replica pool (as SVC_READ_POOL for the primary's). */
  pool: number;
  /** Coalesce identical reads on each replica's pool (store/coalesce.ts). */
  coalesce?: boolean;
}

/** The most primary positions kept for measuring lag (one per poll that saw the WAL move). */
const MAX_SAMPLES = 4096;

/** `host:port/db` of a URL, without credentials (health, metrics, logs). */
export function replicaName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'replica';
  }
}

interface Waiter {
  lsn: number;
  resolve: (r: Replica | undefined) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class ReadReplicas {
  readonly replicas: Replica[];
  /** The primary's read pool: fallback, drafts, and reads no replica may answer yet. */
  readonly primary: ContentSql;
  readonly #control: Sql;
  readonly #opts: ReplicaOptions;
  readonly #primaryReader: RoutedReads;
  /** Primary WAL positions by time, oldest first (lag is measured against them). */
  readonly #samples: { at: number; lsn: number }[] = [];
  /** Per project: the LSN a published read must see (the latest change this process heard of). */
  readonly #floors = new Map<string, number>();
  /** Projects changed by another process whose LSN the next primary sample stands for. */
  #pending = new Set<string>();
  #waiters: Waiter[] = [];
  #timer: ReturnType<typeof setInterval> | undefined;
  #next = 0;
  #polling: Promise<void> | undefined;
  /** The latest commit LSN of this process's writes (x-svc-lsn of a write's response). */
  lastCommitLsn = 0;
  primaryLsn = 0;
  /** Reads sent to the primary because no replica could answer them. */
  primaryReads = 0;

  constructor(control: Sql, primary: ContentSql, opts: ReplicaOptions) {
    this.#control = control;
    this.primary = primary;
    this.#opts = opts;
    this.#primaryReader = new RoutedReads(undefined, this);
    this.replicas = opts.urls.map(
      (url, i) =>
        new Replica(
          replicaName(url),
          connectContentSql(url, { max: opts.pool, pool: `replica${i}`, coalesce: opts.coalesce }),
          this,
        ),
    );
  }

  get options(): Readonly<ReplicaOptions> {
    return this.#opts;
  }

  /** First poll (so a start knows its replicas' state), then one every pollMs. */
  async start(): Promise<void> {
    await this.poll();
    this.#timer = setInterval(() => void this.poll(), this.#opts.pollMs);
    this.#timer.unref?.();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#polling;
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer);
      w.resolve(undefined);
    }
    await Promise.all(this.replicas.map((r) => r.sql.close({ timeout: 2 }).catch(() => {})));
  }

  /** This process committed a change of `projectId` at `lsn`. */
  committed(projectId: string, lsn: number): void {
    if (lsn > this.lastCommitLsn) this.lastCommitLsn = lsn;
    if (lsn > (this.#floors.get(projectId) ?? 0)) this.#floors.set(projectId, lsn);
  }

  /**
   * Another process changed `projectId`, heard on the bus. With `lsn` (the relay names the
   * primary's position past the commit: sql/053_bus_relay_lsn.sql) that is the project's floor;
   * without (a process of an older version relayed it), the primary until the next poll.
   */
  heard(projectId: string, lsn?: number): void {
    if (lsn && lsn > 0) {
      if (lsn > (this.#floors.get(projectId) ?? 0)) this.#floors.set(projectId, lsn);
    } else this.#pending.add(projectId);
  }

  /**
   * The pool a published read of `projectId` uses; `presented`: an LSN the client sent. Costs a
   * lookup and a compare; a read that needs a later position than any replica has gets a reader
   * that waits up to waitMs (on its first statement) before using the primary.
   */
  route(projectId: string, presented = 0): RoutedReads {
    if (this.#pending.has(projectId)) {
      this.primaryReads++;
      return this.#primaryReader;
    }
    const floor = Math.max(this.#floors.get(projectId) ?? 0, presented);
    const n = this.replicas.length;
    let any = false;
    for (let i = 0; i < n; i++) {
      const r = this.replicas[(this.#next + i) % n]!;
      if (r.state !== 'up') continue;
      any = true;
      if (r.replayLsn >= floor) {
        this.#next = (this.#next + i + 1) % n;
        r.reads++;
        return r.reader;
      }
    }
    if (!any || this.#opts.waitMs <= 0) {
      this.primaryReads++;
      return this.#primaryReader;
    }
    return new RoutedReads(undefined, this, floor);
  }

  /** A reader routed per statement (subscriptions: their context outlives many changes). */
  live(projectId: string): RoutedReads {
    return new LiveReads(projectId, this);
  }

  /** A replica in rotation that has replayed `lsn`, within waitMs; else undefined (the primary). */
  waitFor(lsn: number): Promise<Replica | undefined> {
    const ready = this.#ready(lsn);
    if (ready) return Promise.resolve(ready);
    // Ask now rather than at the next tick: a read-back otherwise waits half a poll interval on
    // average. Polls never overlap (one in flight, shared), so this adds at most one round of
    // polling queries at a time, and only on the path after a write.
    void this.poll();
    // Bounded: at most as many waiters as reads in flight, each gone after waitMs.
    return new Promise((resolve) => {
      const w: Waiter = {
        lsn,
        resolve,
        timer: setTimeout(() => {
          this.#waiters = this.#waiters.filter((x) => x !== w);
          this.primaryReads++;
          resolve(undefined);
        }, this.#opts.waitMs),
      };
      this.#waiters.push(w);
    });
  }

  #ready(lsn: number): Replica | undefined {
    for (const r of this.replicas)
      if (r.state === 'up' && r.replayLsn >= lsn) {
        r.reads++;
        return r;
      }
    return undefined;
  }

  /** A read failed on `replica`: out of rotation until a poll finds it well again. */
  failed(replica: Replica, err: unknown): void {
    replica.fallbacks++;
    replica.state = 'down';
    replica.lastError = err instanceof Error ? err.message.slice(0, 200) : 'read failed';
  }

  /** One round of polling (also what tests call to not wait for the timer). */
  poll(): Promise<void> {
    this.#polling ??= this.#poll().finally(() => (this.#polling = undefined));
    return this.#polling;
  }

  async #poll(): Promise<void> {
    const timeout = Math.max(1000, 5 * this.#opts.pollMs);
    // Taken before the replicas answer: projects heard of before this sample are covered by it.
    const pending = this.#pending;
    this.#pending = new Set();
    try {
      const [row] = await withDeadline(
        this.#control<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`,
        timeout,
        "the primary's WAL position",
      );
      const lsn = parseLsn(row?.lsn);
      const now = Date.now();
      this.primaryLsn = lsn;
      if (!this.#samples.length || this.#samples[this.#samples.length - 1]!.lsn !== lsn)
        this.#samples.push({ at: now, lsn });
      // Older than twice the bound (or the bounded count) no sample can decide anything any more.
      while (
        this.#samples.length > MAX_SAMPLES ||
        (this.#samples.length > 1 && this.#samples[1]!.at < now - 2 * this.#opts.maxLagMs - 10 * this.#opts.pollMs)
      )
        this.#samples.shift();
      for (const p of pending) if (lsn > (this.#floors.get(p) ?? 0)) this.#floors.set(p, lsn);
    } catch {
      // The primary did not answer: those projects stay on the primary a poll longer.
      for (const p of pending) this.#pending.add(p);
    }
    await Promise.all(this.replicas.map((r) => this.#pollReplica(r, timeout)));
    this.#wake();
    this.#prune();
  }

  async #pollReplica(r: Replica, timeout: number): Promise<void> {
    if (r.polling) return;
    r.polling = true;
    try {
      const [row] = await withDeadline(
        r.sql.unsafe(
          'select pg_last_wal_replay_lsn()::text as lsn, pg_is_in_recovery() as standby',
        ) as unknown as Promise<{ lsn: string | null; standby: boolean }[]>,
        timeout,
        'the replay position',
      );
      if (!row?.standby) {
        r.state = 'down';
        r.lastError = 'not a standby (pg_is_in_recovery() is false)';
        return;
      }
      r.replayLsn = parseLsn(row.lsn);
      r.lastError = undefined;
      this.#measure(r, Date.now());
    } catch (err) {
      r.state = 'down';
      r.lastError = err instanceof Error ? err.message.slice(0, 200) : 'unreachable';
    } finally {
      r.polling = false;
    }
  }

  #measure(r: Replica, now: number): void {
    r.lagBytes = Math.max(0, this.primaryLsn - r.replayLsn);
    // The first primary position the replica has not replayed: it has been behind since then.
    const behind = this.#samples.find((s) => s.lsn > r.replayLsn);
    r.lagMs = behind ? now - behind.at : 0;
    const bound = this.#opts.maxLagMs;
    if (r.state === 'up') {
      if (r.lagMs > bound) r.state = 'lagging';
    } else if (r.lagMs <= bound / 2) r.state = 'up';
  }

  #wake(): void {
    if (!this.#waiters.length) return;
    const still: Waiter[] = [];
    for (const w of this.#waiters) {
      const r = this.#ready(w.lsn);
      if (r) {
        clearTimeout(w.timer);
        w.resolve(r);
      } else still.push(w);
    }
    this.#waiters = still;
  }

  /** Floors every replica has passed decide nothing: dropped, so the map stays small. */
  #prune(): void {
    let min = Infinity;
    for (const r of this.replicas) min = Math.min(min, r.replayLsn);
    for (const [p, lsn] of this.#floors) if (lsn <= min) this.#floors.delete(p);
  }

  /** For GET /health and /metrics. */
  status(): {
    name: string;
    state: ReplicaState;
    lagMs: number;
    lagBytes: number;
    replayLsn: string;
    reads: number;
    fallbacks: number;
    error?: string;
  }[] {
    return this.replicas.map((r) => ({
      name: r.name,
      state: r.state,
      lagMs: r.lagMs,
      lagBytes: r.lagBytes,
      replayLsn: formatLsn(r.replayLsn),
      reads: r.reads,
      fallbacks: r.fallbacks,
      ...(r.lastError ? { error: r.lastError } : {}),
    }));
  }
}
