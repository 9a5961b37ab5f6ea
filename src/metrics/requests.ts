import { randomUUID } from 'node:crypto';
import type { LogMode } from '../env.ts';
import type { Counter, Histogram, MetricsRegistry } from './registry.ts';

/**
 * Every request any listener served, counted and logged once: `svc_http_requests_total` and
 * `svc_http_request_duration_seconds` by surface and route (the route pattern, never the raw
 * path, so series stay bounded), and one line per request — JSON with `SVC_LOG=json`, a readable
 * line with `text`, none with `off`. The line names the request id (the caller's `x-request-id`
 * when sane, else a new one), the project and the key id that the gate resolved; never the key,
 * a token or the query string. Lines are made and written in batches, not one write per request.
 */
export interface Served {
  method: string;
  /** Which part of the service: graphql, rest, control, realtime, collab, metrics, health… */
  surface: string;
  /** The route pattern (`/v1/control/projects/:id/config`), or `unmatched`. */
  route: string;
  path: string;
  status: number;
  /** ms, from `start()`. */
  ms: number;
}

/** A route's counters, resolved once (RequestLog.meter). */
export interface RouteMeter {
  /** Counts, times (from `start(request)`) and logs one answered request. */
  done(request: Request, method: string, path: string, status: number): void;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * A request's start time and caller ride on the request object under these symbols: two
 * WeakMap entries per request (set, then read) cost ~0.5 µs a request more (Bun 1.4, this box;
 * docs/decisions.md, "Writes, session 5: service CPU per mutation"). Private to this module, gone with the request.
 */
const STARTED = Symbol('svc.request.started');
const CALLER = Symbol('svc.request.caller');
type Tracked = Request & { [STARTED]?: number; [CALLER]?: { keyId: string; projectId: string } };
const FLUSH_MS = 50;

export class RequestLog {
  readonly #mode: LogMode;
  readonly #write: (chunk: string) => void;
  readonly #count: Counter;
  readonly #latency: Histogram;
  readonly #counters = new Map<string, { inc(n?: number): void }>();
  readonly #timers = new Map<string, { observe(v: number): void }>();
  readonly #batch = new Batch();
  #lastMs = -1;
  #lastTime = '';
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    metrics: MetricsRegistry,
    mode: LogMode,
    write: (chunk: string) => void = (s) => void process.stdout.write(s),
  ) {
    this.#mode = mode;
    this.#write = write;
    this.#count = metrics.counter('svc_http_requests_total', 'Requests served, by surface, route and status.', [
      'surface',
      'route',
      'status',
    ]);
    this.#latency = metrics.histogram(
      'svc_http_request_duration_seconds',
      'Time to the response (to the headers for streams and upgrades).',
      ['surface', 'route'],
    );
  }

  start(request: Request): void {
    (request as Tracked)[STARTED] = performance.now();
  }

  /** The same request under another object (src/http/body.ts wraps requests that have a body). */
  carry(from: Request, to: Request): void {
    const t = (from as Tracked)[STARTED];
    if (t !== undefined) (to as Tracked)[STARTED] = t;
  }

  /** ms since `start(request)` (0 when it was not started). */
  elapsed(request: Request): number {
    const t = (request as Tracked)[STARTED];
    return t === undefined ? 0 : performance.now() - t;
  }

  /** Who made the request, as the gate resolved it (adapters call this after the gate). */
  noteCaller(request: Request, key: { keyId: string; projectId: string }): void {
    // The principal itself (cached per key), not a copy: one allocation less per request.
    (request as Tracked)[CALLER] = key;
  }

  done(request: Request, served: Served): void {
    const { surface, route, status, ms } = served;
    const ck = `${surface}\0${route}\0${status}`;
    let c = this.#counters.get(ck);
    if (!c) this.#counters.set(ck, (c = this.#count.child(surface, route, String(status))));
    c.inc();
    const tk = `${surface}\0${route}`;
    let t = this.#timers.get(tk);
    if (!t) this.#timers.set(tk, (t = this.#latency.child(surface, route)));
    t.observe(ms / 1000);
    if (this.#mode !== 'off') this.#log(request, served.method, served.path, surface, route, status, ms);
  }

  /**
   * The counters of one route, for an adapter that answers it outside Elysia (the direct
   * GraphQL route, http/graphql-direct.ts): `done` then costs no key strings per request.
   */
  meter(surface: string, route: string): RouteMeter {
    const latency = this.#latency.child(surface, route);
    const byStatus = new Map<number, { inc(n?: number): void }>();
    return {
      done: (request, method, path, status) => {
        const ms = this.elapsed(request);
        let c = byStatus.get(status);
        if (!c) byStatus.set(status, (c = this.#count.child(surface, route, String(status))));
        c.inc();
        latency.observe(ms / 1000);
        if (this.#mode !== 'off') this.#log(request, method, path, surface, route, status, ms);
      },
    };
  }

  /**
   * A request's line is noted, not made: its parts go into the batch's columns, and the lines
   * are made and written together at the flush (every LOG_BATCH requests or FLUSH_MS). Made per
   * request, each line's strings lived until the batch was written — through the young
   * collections of its 10–50 ms — and the log cost ~2–3 µs of a cached read's ~17 µs of server
   * CPU at 35,000 requests/s; noted, ~0.1 µs plus the lines made at once (bench/NOTES.md, issue 31).
   */
  #log(request: Request, method: string, path: string, surface: string, route: string, status: number, ms: number) {
    const b = this.#batch;
    const i = b.n++;
    const given = request.headers.get('x-request-id');
    b.ids[i] = given !== null && REQUEST_ID.test(given) ? given : null;
    b.who[i] = (request as Tracked)[CALLER] ?? null;
    b.method[i] = method;
    b.path[i] = path;
    b.surface[i] = surface;
    b.route[i] = route;
    b.status[i] = status;
    b.ms[i] = ms;
    b.at[i] = Date.now();
    if (b.n === LOG_BATCH) this.flush();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.#timer.unref?.();
    }
  }

  /** The line of the batch's `i`th request. */
  #line(b: Batch, i: number): string {
    const id = b.ids[i] ?? randomUUID();
    const who = b.who[i];
    const time = this.#time(b.at[i]!);
    const ms = b.ms[i]!;
    if (this.#mode === 'json')
      return JSON.stringify({
        time,
        requestId: id,
        method: b.method[i],
        path: b.path[i],
        surface: b.surface[i],
        route: b.route[i],
        status: b.status[i],
        durationMs: Math.round(ms * 1000) / 1000,
        projectId: who?.projectId ?? null,
        keyId: who?.keyId ?? null,
      });
    const caller = who ? ` project=${who.projectId} key=${who.keyId}` : '';
    // ms.toFixed(1) from whole tenths: two small integers print faster than a double (~0.3 µs a line).
    const tenths = Math.round(ms * 10);
    return `${time} ${b.method[i]} ${b.path[i]} ${b.status[i]} ${Math.trunc(tenths / 10)}.${tenths % 10}ms${caller} id=${id}`;
  }

  /** The ISO time of a ms timestamp, made once per millisecond (a Date and its toISOString were ~0.3–0.6 µs a request). */
  #time(at: number): string {
    if (at !== this.#lastMs) {
      this.#lastMs = at;
      this.#lastTime = new Date(at).toISOString();
    }
    return this.#lastTime;
  }

  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const b = this.#batch;
    if (b.n === 0) return;
    let chunk = '';
    for (let i = 0; i < b.n; i++) chunk += `${this.#line(b, i)}\n`;
    // The columns keep their strings until overwritten: cleared, so a quiet process holds none.
    b.ids.fill(null, 0, b.n);
    b.who.fill(null, 0, b.n);
    b.path.fill('', 0, b.n);
    b.n = 0;
    try {
      this.#write(chunk);
    } catch {
      // stdout gone (a closed pipe): the counters still count.
    }
  }
}

/**
 * At most this many requests' lines wait for a write (~150 KB of text lines): the columns hold
 * what the request already held (its caller, path and method, its own request id), so a larger
 * batch costs fewer writes and keeps nothing extra alive.
 */
const LOG_BATCH = 1024;

/** The parts of the lines not yet written, by column. */
class Batch {
  n = 0;
  readonly ids: (string | null)[] = new Array(LOG_BATCH).fill(null);
  readonly who: ({ keyId: string; projectId: string } | null)[] = new Array(LOG_BATCH).fill(null);
  readonly method: string[] = new Array(LOG_BATCH).fill('');
  readonly path: string[] = new Array(LOG_BATCH).fill('');
  readonly surface: string[] = new Array(LOG_BATCH).fill('');
  readonly route: string[] = new Array(LOG_BATCH).fill('');
  readonly status = new Uint16Array(LOG_BATCH);
  readonly ms = new Float64Array(LOG_BATCH);
  readonly at = new Float64Array(LOG_BATCH);
}

/** The surface of an API route, for the `surface` label. */
export function surfaceOf(route: string): string {
  if (route.startsWith('/graphql') || route === '/schema' || route === '/graphiql') return 'graphql';
  if (route.startsWith('/v1/control')) return 'control';
  if (route === '/health' || route === '/metrics') return route.slice(1);
  if (route.startsWith('/auth') || route.startsWith('/.well-known')) return 'identity';
  return route === 'unmatched' ? 'unmatched' : 'rest';
}
