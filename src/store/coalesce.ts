/** A pool as this module uses it: Bun.SQL's `unsafe` (store/db.ts `ContentSql`, which imports this). */
export interface ReadPool {
  unsafe(text: string, values?: never[]): unknown;
}

/**
 * Read coalescing on a content read pool (`SVC_READ_COALESCE`, on by default; docs/decisions.md).
 *
 * A read whose statement — the same text and the same parameters, on the same pool — is already
 * running or waiting does not send its own: it waits for the next one, which every identical read
 * that arrives meanwhile shares. That next statement starts only after the running one ends, so
 * it starts after every read it answers arrived: a read still sees every write committed before
 * it was made, as without coalescing (Apollo Router's query deduplication joins a request already
 * in flight instead, which can answer with data older than the request). Statements of
 * different reads run side by side, at most `maxInFlight` at a time (the pool's connections, two
 * deep: Bun's client pipelines them); the rest wait here in arrival order, where identical ones
 * can meet, instead of in the client's queue, where they cannot.
 *
 * Why: on a 2-core VM, PostgreSQL spent 55–62 µs of backend CPU on `select 1` and 120–150 µs on
 * a ten-record page (bench/NOTES.md, issue 31), nearly all of it per statement rather than per
 * row. Thirty-two clients reading the same page sent ~8 reads per statement with this on; the
 * uncached read went from 0.29 to 0.71 × ceiling-jit and PostgreSQL from 146 to 21 µs a read.
 *
 * Callers share the rows of a coalesced statement: each gets its own array, the row objects are
 * the same, and nothing that reads them writes to them (test/store/coalesce.test.ts compares
 * concurrent answers with sequential ones). Only reads go through here (content/db.ts `run` on a
 * read pool, store/routed-reads.ts); a transaction's statements never do.
 *
 * Bounds: a waiting statement is one entry (its key: text and parameters, which its reads hold
 * anyway) with its reads' callbacks, so what waits here grows with the reads in flight, as the
 * client's own queue did; one pass over the waiting skips at most `maxInFlight` of them.
 */

interface Joiner {
  resolve(rows: unknown[]): void;
  reject(err: unknown): void;
}

interface Waiting {
  key: string;
  text: string;
  params: unknown[];
  joiners: Joiner[];
}

/** The reads asked of the pool are `statements + coalesced`. */
export interface CoalesceStats {
  /** Statements sent. */
  statements: number;
  /** Reads answered by a statement shared with an earlier identical read. */
  coalesced: number;
}

export class ReadCoalescer {
  readonly stats: CoalesceStats = { statements: 0, coalesced: 0 };
  #inFlight = 0;
  /** Keys of the statements running now. */
  readonly #running = new Set<string>();
  /** Statements waiting to start, by key, in arrival order (Map iteration order). */
  readonly #waiting = new Map<string, Waiting>();

  constructor(
    readonly pool: ReadPool,
    readonly maxInFlight: number,
  ) {}

  /** Reads waiting for a statement to start (a gauge). */
  get waiting(): number {
    let n = 0;
    for (const w of this.#waiting.values()) n += w.joiners.length;
    return n;
  }

  run<T>(text: string, params: unknown[]): Promise<T[]> {
    // NUL cannot occur in a statement's text: no text and parameters run into another's.
    const key = plain(params) ? `${text}\u0000${JSON.stringify(params)}` : undefined;
    if (key === undefined) {
      this.stats.statements++;
      return send<T>(this.pool, text, params);
    }
    let w = this.#waiting.get(key);
    if (w) this.stats.coalesced++;
    else if (this.#inFlight < this.maxInFlight && !this.#running.has(key))
      return this.#start(key, text, params) as Promise<T[]>;
    else this.#waiting.set(key, (w = { key, text, params, joiners: [] }));
    const joiners = w.joiners;
    return new Promise<T[]>((resolve, reject) => joiners.push({ resolve: resolve as Joiner['resolve'], reject }));
  }

  #start(key: string, text: string, params: unknown[]): Promise<unknown[]> {
    this.#inFlight++;
    this.stats.statements++;
    this.#running.add(key);
    const done = () => {
      this.#inFlight--;
      this.#running.delete(key);
      this.#next();
    };
    let p: Promise<unknown[]>;
    try {
      p = send(this.pool, text, params);
    } catch (err) {
      p = Promise.reject(err);
    }
    // Bun's queries start when first awaited: this `then` sends it.
    p.then(done, done);
    return p;
  }

  /**
   * Starts waiting statements in arrival order while there is room, passing over those whose
   * twin is still running (at most `maxInFlight` of them, so this loop is short).
   */
  #next(): void {
    for (const w of this.#waiting.values()) {
      if (this.#inFlight >= this.maxInFlight) return;
      if (this.#running.has(w.key)) continue;
      this.#waiting.delete(w.key);
      this.#start(w.key, w.text, w.params).then(
        (rows) => {
          for (const j of w.joiners) j.resolve(rows.slice());
        },
        (err) => {
          for (const j of w.joiners) j.reject(err);
        },
      );
    }
  }
}

/**
 * Whether JSON names these parameters exactly: strings (lone surrogates are escaped), finite
 * numbers but -0, booleans, null and arrays of them — what content/sql-builder.ts `Params` holds. Any
 * other value (NaN would be JSON's `null`, a Date a string) is read on its own, never shared.
 */
function plain(params: readonly unknown[], depth = 0): boolean {
  for (const v of params) {
    const t = typeof v;
    if (t === 'string' || t === 'boolean' || v === null) continue;
    if (t === 'number' && Number.isFinite(v) && !Object.is(v, -0)) continue;
    if (Array.isArray(v) && depth < 4 && plain(v, depth + 1)) continue;
    return false;
  }
  return true;
}

const coalescers = new WeakMap<object, ReadCoalescer>();

/** Coalesces the reads sent to `pool` through `read` from now on. */
export function coalesceReads(pool: ReadPool, maxInFlight: number): ReadCoalescer {
  const c = new ReadCoalescer(pool, maxInFlight);
  coalescers.set(pool, c);
  return c;
}

export function coalescerOf(pool: object): ReadCoalescer | undefined {
  return coalescers.get(pool);
}

/** A read statement on a pool: coalesced when the pool's reads are (`coalesceReads`), else sent. */
export function read<T>(pool: ReadPool, text: string, params: unknown[]): Promise<T[]> {
  const c = coalescers.get(pool);
  return c ? c.run<T>(text, params) : send<T>(pool, text, params);
}

/** The statement sent as it is, on its own. */
function send<T>(pool: ReadPool, text: string, params: unknown[]): Promise<T[]> {
  return pool.unsafe(text, params as never[]) as unknown as Promise<T[]>;
}
