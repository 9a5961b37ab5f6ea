/**
 * A small Prometheus registry (text exposition format 0.0.4). Each capability registers its own
 * series into the Service's registry: counters and histograms it updates as things happen, and
 * gauges read at scrape time from the state it already keeps (live actors, cache sizes, pools).
 *
 * Written here rather than taken from prom-client: counting a request there (labelled counter +
 * histogram, bound children) measured 1.4 µs, about 7 % of a cached read's server CPU; a bound
 * child here is an array increment (docs/decisions.md).
 */
export type LabelValues = readonly string[];

/** What a gauge's collector returns: one value, or one value per label set. */
export type GaugeSample = number | Iterable<readonly [LabelValues, number]>;

interface Series {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  render(out: string[]): void | Promise<void>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labelText(names: readonly string[], values: LabelValues, extra = ''): string {
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i] ?? '')}"`);
  if (extra) parts.push(extra);
  return parts.length ? `{${parts.join(',')}}` : '';
}

function num(v: number): string {
  return Number.isFinite(v) ? String(v) : v > 0 ? '+Inf' : v < 0 ? '-Inf' : 'NaN';
}

/** A monotonically increasing count, per label set. Keep `child(...)` on hot paths. */
export class Counter {
  readonly #children = new Map<string, { values: LabelValues; value: number }>();
  constructor(readonly labelNames: readonly string[]) {}

  child(...values: string[]): { inc(n?: number): void } {
    const key = values.join('\0');
    let c = this.#children.get(key);
    if (!c) this.#children.set(key, (c = { values, value: 0 }));
    const slot = c;
    return {
      inc(n = 1) {
        slot.value += n;
      },
    };
  }

  inc(values: LabelValues = [], n = 1): void {
    this.child(...values).inc(n);
  }

  /** Current value of one label set (tests, derived figures). */
  get(values: LabelValues = []): number {
    return this.#children.get(values.join('\0'))?.value ?? 0;
  }

  lines(name: string, out: string[]): void {
    for (const c of this.#children.values()) out.push(`${name}${labelText(this.labelNames, c.values)} ${num(c.value)}`);
  }
}

/** Observations in cumulative buckets (`le`), with their sum and count, per label set. */
export class Histogram {
  readonly #children = new Map<string, { values: LabelValues; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {}

  child(...values: string[]): { observe(v: number): void } {
    const key = values.join('\0');
    let c = this.#children.get(key);
    if (!c) this.#children.set(key, (c = { values, counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 }));
    const slot = c;
    const bounds = this.buckets;
    return {
      observe(v: number) {
        // Counted in the first bucket that holds it; cumulated when rendered.
        let i = 0;
        while (i < bounds.length && v > bounds[i]!) i++;
        if (i < bounds.length) slot.counts[i]!++;
        slot.sum += v;
        slot.count++;
      },
    };
  }

  lines(name: string, out: string[]): void {
    for (const c of this.#children.values()) {
      let running = 0;
      this.buckets.forEach((b, i) => {
        running += c.counts[i]!;
        out.push(`${name}_bucket${labelText(this.labelNames, c.values, `le="${num(b)}"`)} ${running}`);
      });
      out.push(`${name}_bucket${labelText(this.labelNames, c.values, 'le="+Inf"')} ${c.count}`);
      out.push(`${name}_sum${labelText(this.labelNames, c.values)} ${num(c.sum)}`);
      out.push(`${name}_count${labelText(this.labelNames, c.values)} ${c.count}`);
    }
  }
}

/** Latency buckets in seconds, from 0.5 ms to 10 s. */
export const LATENCY_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
] as const;

export class MetricsRegistry {
  readonly #series = new Map<string, Series>();
  /** `svc_live_actors{kind,state}`: every actor registry adds its kind here. */
  readonly actors = this.family('svc_live_actors', 'Live actors by kind and state.', ['kind', 'state']);

  #add(s: Series): void {
    if (!NAME.test(s.name)) throw new Error(`bad metric name ${s.name}`);
    if (this.#series.has(s.name)) throw new Error(`metric ${s.name} is registered twice`);
    this.#series.set(s.name, s);
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    const c = new Counter(labelNames);
    this.#add({ name, help, type: 'counter', render: (out) => c.lines(name, out) });
    return c;
  }

  histogram(
    name: string,
    help: string,
    labelNames: readonly string[] = [],
    buckets: readonly number[] = LATENCY_BUCKETS,
  ): Histogram {
    const h = new Histogram(labelNames, buckets);
    this.#add({ name, help, type: 'histogram', render: (out) => h.lines(name, out) });
    return h;
  }

  /**
   * A value read when scraped, from state the capability keeps anyway. `collect` may be async
   * (a query); a collector that throws is skipped for that scrape. Returns an unregister.
   */
  gauge(
    name: string,
    help: string,
    collect: () => GaugeSample | Promise<GaugeSample>,
    labelNames: readonly string[] = [],
  ): () => void {
    this.#add({
      name,
      help,
      type: 'gauge',
      render: async (out) => {
        const sample = await collect();
        if (typeof sample === 'number') out.push(`${name} ${num(sample)}`);
        else for (const [values, v] of sample) out.push(`${name}${labelText(labelNames, values)} ${num(v)}`);
      },
    });
    return () => this.#series.delete(name);
  }

  /**
   * One gauge that several capabilities feed, each under its own label values: live actors by
   * kind (projects, channels, rooms, executions) all go into `svc_live_actors`. Returns `add`.
   */
  family(
    name: string,
    help: string,
    labelNames: readonly string[],
  ): { add(collect: () => Iterable<readonly [LabelValues, number]>): () => void } {
    const parts = new Set<() => Iterable<readonly [LabelValues, number]>>();
    this.gauge(name, help, () => [...parts].flatMap((p) => [...p()]), labelNames);
    return {
      add(collect) {
        parts.add(collect);
        return () => parts.delete(collect);
      },
    };
  }

  /** A counter read when scraped (a count another object already keeps). */
  counterFrom(name: string, help: string, collect: () => GaugeSample, labelNames: readonly string[] = []): () => void {
    this.#add({
      name,
      help,
      type: 'counter',
      render: (out) => {
        const sample = collect();
        if (typeof sample === 'number') out.push(`${name} ${num(sample)}`);
        else for (const [values, v] of sample) out.push(`${name}${labelText(labelNames, values)} ${num(v)}`);
      },
    });
    return () => this.#series.delete(name);
  }

  /** The exposition text (Content-Type `text/plain; version=0.0.4`). */
  async render(): Promise<string> {
    const out: string[] = [];
    for (const s of this.#series.values()) {
      const lines: string[] = [];
      try {
        await s.render(lines);
      } catch (err) {
        console.error(`metrics: ${s.name} not collected:`, err instanceof Error ? err.message : err);
        continue;
      }
      out.push(
        `# HELP ${s.name} ${s.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`,
        `# TYPE ${s.name} ${s.type}`,
        ...lines,
      );
    }
    return out.join('\n') + '\n';
  }
}
