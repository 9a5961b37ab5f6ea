import type { Sql } from '../store/db.ts';
import { RateLimited } from '../errors.ts';

/**
 * Per-key rate limiting over fixed one-hour windows (spec "Limits": 10,000 requests per hour
 * per key unless the key says otherwise).
 *
 * The hot path never waits on PostgreSQL: each process counts in memory and a timer adds the
 * counts to `api_key_usage` in one batched upsert, whose RETURNING gives back the sum over all
 * processes. Keys this process has not counted lately are refreshed in one batched select, so
 * another process's traffic shows up within about a second. The only awaited read is the
 * first time a process sees a key in a window (one query per key per hour per process).
 * Over-admission across processes is bounded by what they admit within one flush interval.
 */
export const DEFAULT_RATE_LIMIT = 10_000;
export const WINDOW_SECONDS = 3600;

export interface RateDecision {
  limit: number;
  remaining: number;
  /** Unix seconds at which the current window ends. */
  reset: number;
  allowed: boolean;
  /** Seconds until the window resets (for `Retry-After`). */
  retryAfter: number;
}

interface KeyWindow {
  keyId: string;
  window: number;
  /** True for the entry of an older window kept only until its counts are flushed. */
  retired: boolean;
  /** The count PostgreSQL last reported for this key and window, every process included. */
  global: number;
  /** Admitted here and not yet sent. */
  pending: number;
  /** Sent in the running flush, not yet acknowledged. */
  inflight: number;
  loading: Promise<void> | undefined;
  refreshedAt: number;
}

export interface RateLimiterOptions {
  flushMs?: number;
  refreshMs?: number;
  windowSeconds?: number;
  now?: () => number;
}

export class RateLimiter {
  readonly #sql: Sql;
  readonly #states = new Map<string, KeyWindow>();
  readonly #flushMs: number;
  readonly #refreshMs: number;
  readonly #window: number;
  readonly #now: () => number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticking: Promise<void> | undefined;
  #stopped = false;
  #lastCleanup = 0;

  constructor(sql: Sql, opts: RateLimiterOptions = {}) {
    this.#sql = sql;
    this.#flushMs = opts.flushMs ?? 200;
    this.#refreshMs = opts.refreshMs ?? 1000;
    this.#window = opts.windowSeconds ?? WINDOW_SECONDS;
    this.#now = opts.now ?? Date.now;
    this.#timer = setInterval(() => void this.flush(), this.#flushMs);
    this.#timer.unref?.();
  }

  /**
   * Counts `n` requests (each operation of a batched request is one) against the key's limit.
   * Refused requests are not counted. Never throws; see `rateLimitError`.
   */
  take(principal: { keyId: string }, n = 1, limit: number = DEFAULT_RATE_LIMIT): RateDecision | Promise<RateDecision> {
    const nowMs = this.#now();
    const window = this.#windowOf(nowMs);
    let st = this.#states.get(principal.keyId);
    if (!st || st.window !== window) {
      const fresh: KeyWindow = {
        keyId: principal.keyId,
        window,
        retired: false,
        global: 0,
        pending: 0,
        inflight: 0,
        loading: undefined,
        refreshedAt: nowMs,
      };
      // Counts of an older window still waiting to be flushed move to their own entry.
      if (st && (st.pending > 0 || st.inflight > 0)) {
        st.retired = true;
        this.#states.set(`${principal.keyId}\0${st.window}`, st);
      }
      fresh.loading = this.#load(principal.keyId, fresh);
      this.#states.set(principal.keyId, fresh);
      st = fresh;
    }
    // Only the first requests of a key in a window wait, and only for that key's one read.
    if (st.loading) {
      const waiting = st;
      return st.loading.then(() => this.#decide(waiting, window, nowMs, n, limit));
    }
    return this.#decide(st, window, nowMs, n, limit);
  }

  /** The hot path: a comparison and an increment. */
  #decide(st: KeyWindow, window: number, nowMs: number, n: number, limit: number): RateDecision {
    const used = st.global + st.pending + st.inflight;
    const allowed = n > 0 && used + n <= limit;
    if (allowed) st.pending += n;
    const reset = window + this.#window;
    return {
      limit,
      remaining: Math.max(0, limit - used - (allowed ? n : 0)),
      reset,
      allowed,
      retryAfter: Math.max(1, reset - Math.floor(nowMs / 1000)),
    };
  }

  /** Sends pending counts and refreshes idle keys; one run at a time. */
  flush(): Promise<void> {
    this.#ticking ??= this.#tick().finally(() => (this.#ticking = undefined));
    return this.#ticking;
  }

  /** Flushes what is left and stops the timer. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    if (!this.#stopped) await this.flush();
    this.#stopped = true;
  }

  #windowOf(ms: number): number {
    const s = Math.floor(ms / 1000);
    return s - (s % this.#window);
  }

  async #load(keyId: string, st: KeyWindow): Promise<void> {
    try {
      const [row] = await this.#sql<{ count: string }[]>`
        select count from api_key_usage where key_id = ${keyId} and window_start = ${st.window}`;
      st.global = Math.max(st.global, row ? Number(row.count) : 0);
    } catch (err) {
      // Fail open on a database hiccup: the limit is a guard rail, not an authorisation.
      this.#report(err);
    } finally {
      st.loading = undefined;
    }
  }

  async #tick(): Promise<void> {
    if (this.#stopped) return;
    const nowMs = this.#now();
    const current = this.#windowOf(nowMs);
    const batch: KeyWindow[] = [];
    const idle: KeyWindow[] = [];
    for (const [mapKey, st] of this.#states) {
      if (st.pending > 0) {
        st.inflight = st.pending;
        st.pending = 0;
        batch.push(st);
      } else if (st.window !== current || st.retired) {
        if (st.inflight === 0) this.#states.delete(mapKey);
      } else if (!st.loading && nowMs - st.refreshedAt >= this.#refreshMs) {
        idle.push(st);
      }
    }
    try {
      if (batch.length > 0) {
        const rows = await this.#sql<{ key_id: string; window_start: string; count: string }[]>`
          insert into api_key_usage (key_id, window_start, count)
          select * from unnest(${batch.map((b) => b.keyId)}::text[], ${batch.map((b) => b.window)}::bigint[],
                               ${batch.map((b) => b.inflight)}::bigint[])
          on conflict (key_id, window_start) do update set count = api_key_usage.count + excluded.count
          returning key_id, window_start, count`;
        // One Map, not a find per key: a flush of n keys stays O(n).
        const counts = new Map<string, number>();
        for (const r of rows) counts.set(`${r.key_id}\0${r.window_start}`, Number(r.count));
        for (const b of batch) {
          const count = counts.get(`${b.keyId}\0${b.window}`);
          if (count !== undefined) b.global = Math.max(b.global, count);
          b.inflight = 0;
          b.refreshedAt = nowMs;
        }
      }
      if (idle.length > 0) {
        const rows = await this.#sql<{ key_id: string; count: string }[]>`
          select key_id, count from api_key_usage
          where window_start = ${current} and key_id = any(${idle.map((i) => i.keyId)}::text[])`;
        const counts = new Map<string, number>();
        for (const r of rows) counts.set(r.key_id, Number(r.count));
        for (const i of idle) {
          const count = counts.get(i.keyId);
          if (count !== undefined) i.global = Math.max(i.global, count);
          i.refreshedAt = nowMs;
        }
      }
      if (nowMs - this.#lastCleanup > 10 * 60_000) {
        this.#lastCleanup = nowMs;
        await this.#sql`delete from api_key_usage where window_start < ${current - 2 * this.#window}`;
      }
    } catch (err) {
      // Put unacknowledged counts back so the next tick sends them again.
      for (const b of batch) {
        b.pending += b.inflight;
        b.inflight = 0;
      }
      this.#report(err);
    }
  }

  #report(err: unknown): void {
    console.error('rate limiter: flush failed:', err instanceof Error ? err.message : String(err));
  }
}

/** The three headers of spec "Limits", for every response made with a key. */
export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  return {
    'x-ratelimit-limit': String(d.limit),
    'x-ratelimit-remaining': String(d.remaining),
    'x-ratelimit-reset': String(d.reset),
  };
}

/** The error for a refused decision; REST turns `details.retryAfter` into `Retry-After`. */
export function rateLimitError(d: RateDecision): RateLimited {
  return new RateLimited(
    `Rate limit exceeded: ${d.limit} requests per hour for this key; retry after ${d.retryAfter} seconds`,
    {
      retryAfter: d.retryAfter,
      limit: d.limit,
      reset: d.reset,
    },
  );
}
