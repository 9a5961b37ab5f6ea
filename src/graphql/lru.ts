/**
 * LRU caches bounded by entries and by (estimated) bytes, all charged to one memory budget per
 * process, so nothing a client sends can grow the heap past a known bound (issue 10, docs/graphql.md
 * "Execution and caches"). Map insertion order is the LRU order: get moves an entry to the back,
 * eviction takes from the front.
 *
 * Caches live in places that are dropped wholesale (ProjectActor.derived is emptied when a schema
 * version moves), so the budget holds them weakly: a dropped cache's bytes count until it is
 * collected (they are still in the heap until then), and the budget may evict from it meanwhile.
 */
export interface LruOptions<K, V> {
  /** What the cache holds, for metrics ("documents", "responses"). */
  kind: string;
  maxEntries: number;
  maxBytes: number;
  /** Estimated bytes an entry keeps alive (key included). */
  sizeOf: (value: V, key: K) => number;
  budget?: MemoryBudget;
}

interface Meter {
  kind: string;
  entries: number;
  bytes: number;
}

export class MemoryBudget {
  usedBytes = 0;
  evictions = 0;
  /** Entries refused because they did not fit at all. */
  refused = 0;
  readonly #caches = new Set<WeakRef<Lru<unknown, unknown>>>();
  readonly #meters = new Set<Meter>();
  readonly #finalizer = new FinalizationRegistry<{ ref: WeakRef<Lru<unknown, unknown>>; meter: Meter }>(
    ({ ref, meter }) => {
      this.usedBytes -= meter.bytes;
      this.#caches.delete(ref);
      this.#meters.delete(meter);
    },
  );

  constructor(public maxBytes: number) {}

  /** @internal */
  register(cache: Lru<unknown, unknown>, meter: Meter): void {
    const ref = new WeakRef(cache);
    this.#caches.add(ref);
    this.#meters.add(meter);
    this.#finalizer.register(cache, { ref, meter });
  }

  /** Frees room for `bytes` more, each time from the largest cache (the asking one included). */
  makeRoom(bytes: number): boolean {
    if (bytes > this.maxBytes) return false;
    while (this.usedBytes + bytes > this.maxBytes) {
      let largest: Lru<unknown, unknown> | undefined;
      for (const ref of this.#caches) {
        const c = ref.deref();
        if (c && c.bytes > 0 && (!largest || c.bytes > largest.bytes)) largest = c;
      }
      if (!largest) return false;
      largest.evictOldest();
    }
    return true;
  }

  /** Numbers for metrics: the budget, what is used, and per kind of cache. */
  stats(): CacheStats {
    const kinds: CacheStats['kinds'] = {};
    for (const m of this.#meters) {
      const k = (kinds[m.kind] ??= { caches: 0, entries: 0, bytes: 0 });
      k.caches++;
      k.entries += m.entries;
      k.bytes += m.bytes;
    }
    return {
      budgetBytes: this.maxBytes,
      usedBytes: this.usedBytes,
      evictions: this.evictions,
      refused: this.refused,
      kinds,
    };
  }
}

export interface CacheStats {
  budgetBytes: number;
  usedBytes: number;
  evictions: number;
  refused: number;
  kinds: Record<string, { caches: number; entries: number; bytes: number }>;
}

const MB = 1024 * 1024;

/** The one budget of this process (`SVC_GRAPHQL_CACHE_MB`, default 256). */
export const processCacheBudget = new MemoryBudget(Math.max(1, Number(process.env.SVC_GRAPHQL_CACHE_MB) || 256) * MB);

/** The GraphQL caches' numbers, for a metrics endpoint to publish. */
export function graphqlCacheStats(): CacheStats {
  return processCacheBudget.stats();
}

export class Lru<K, V> {
  readonly #map = new Map<K, { value: V; bytes: number }>();
  readonly #meter: Meter;
  readonly #opts: LruOptions<K, V> | undefined;
  readonly max: number;
  /** The entry at the back of the map (the last one set or moved there), if it is still there. */
  #newest: { value: V; bytes: number } | undefined;

  /** A number: bounded by entries only (small internal caches). Options: by entries and bytes. */
  constructor(opts: number | LruOptions<K, V>) {
    this.#opts = typeof opts === 'number' ? undefined : opts;
    this.max = typeof opts === 'number' ? opts : opts.maxEntries;
    this.#meter = { kind: this.#opts?.kind ?? 'other', entries: 0, bytes: 0 };
    this.#opts?.budget?.register(this as Lru<unknown, unknown>, this.#meter);
  }

  get(key: K): V | undefined {
    const e = this.#map.get(key);
    // Already the most recent (a hot entry asked for again and again): no delete and re-insert,
    // two of the three hash operations of a hit (~0.2 µs of a cached read; bench/NOTES.md, issue 31).
    if (e !== undefined && e !== this.#newest) {
      this.#map.delete(key);
      this.#map.set(key, e);
      this.#newest = e;
    }
    return e?.value;
  }

  /** Stores the entry unless it alone is too large for the cache or the budget; says which. */
  set(key: K, value: V): boolean {
    this.delete(key);
    const opts = this.#opts;
    const bytes = opts ? opts.sizeOf(value, key) : 0;
    if (opts) {
      // One entry may take at most an eighth of its cache: a few huge documents cannot flush it.
      if (bytes > opts.maxBytes / 8) {
        if (opts.budget) opts.budget.refused++;
        return false;
      }
      while (this.#map.size > 0 && (this.#map.size >= this.max || this.#meter.bytes + bytes > opts.maxBytes))
        this.evictOldest();
      if (opts.budget && !opts.budget.makeRoom(bytes)) {
        opts.budget.refused++;
        return false;
      }
    } else if (this.#map.size >= this.max) this.evictOldest();
    const e = { value, bytes };
    this.#map.set(key, e);
    this.#newest = e;
    this.#charge(1, bytes);
    return true;
  }

  delete(key: K): void {
    const e = this.#map.get(key);
    if (!e) return;
    this.#map.delete(key);
    this.#charge(-1, -e.bytes);
  }

  /** @internal Drops the least recently used entry; false when empty. */
  evictOldest(): boolean {
    const first = this.#map.keys().next();
    if (first.done) return false;
    this.delete(first.value);
    if (this.#opts?.budget) this.#opts.budget.evictions++;
    return true;
  }

  clear(): void {
    this.#charge(-this.#map.size, -this.#meter.bytes);
    this.#map.clear();
  }

  #charge(entries: number, bytes: number): void {
    this.#meter.entries += entries;
    this.#meter.bytes += bytes;
    if (this.#opts?.budget) this.#opts.budget.usedBytes += bytes;
  }

  get size(): number {
    return this.#map.size;
  }

  get bytes(): number {
    return this.#meter.bytes;
  }
}
