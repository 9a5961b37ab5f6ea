import { randomUUID } from 'node:crypto';
import type { LogMode } from '../env.ts';
import type { Counter, Histogram, MetricsRegistry } from './registry.ts';

/**
 * Every request any listener served, counted and logged once: `svc_http_requests_total` and
 * `svc_http_request_duration_seconds` by surface and route (the route pattern, never the raw
 * path, so series stay bounded), and one line per request — JSON with `SVC_LOG=json`, a readable
 * line with `text`, none with `off`. The line names the request id (the caller's `x-request-id`
 * when sane, else a new one), the project and the key id that the gate resolved; never the key,
 * a token or the query string. Lines are written in batches, not one write per request.
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
const FLUSH_BYTES = 64 * 1024;
const FLUSH_MS = 50;

export class RequestLog {
  readonly #mode: LogMode;
  readonly #write: (chunk: string) => void;
  readonly #count: Counter;
  readonly #latency: Histogram;
  readonly #counters = new Map<string, { inc(n?: number): void }>();
  readonly #timers = new Map<string, { observe(v: number): void }>();
  #buffer = '';
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

  #log(request: Request, method: string, path: string, surface: string, route: string, status: number, ms: number) {
    const given = request.headers.get('x-request-id');
    const id = given !== null && REQUEST_ID.test(given) ? given : randomUUID();
    const who = (request as Tracked)[CALLER];
    const time = this.#time();
    const line =
      this.#mode === 'json'
        ? JSON.stringify({
            time,
            requestId: id,
            method,
            path,
            surface,
            route,
            status,
            durationMs: Math.round(ms * 1000) / 1000,
            projectId: who?.projectId ?? null,
            keyId: who?.keyId ?? null,
          })
        : `${time} ${method} ${path} ${status} ${ms.toFixed(1)}ms${who ? ` project=${who.projectId} key=${who.keyId}` : ''} id=${id}`;
    this.#buffer += line + '\n';
    if (this.#buffer.length >= FLUSH_BYTES) this.flush();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.#timer.unref?.();
    }
  }

  /** The ISO time of now, made once per millisecond (a Date and its toISOString were ~0.3–0.6 µs a request). */
  #time(): string {
    const now = Date.now();
    if (now !== this.#lastMs) {
      this.#lastMs = now;
      this.#lastTime = new Date(now).toISOString();
    }
    return this.#lastTime;
  }

  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#buffer) return;
    const chunk = this.#buffer;
    this.#buffer = '';
    try {
      this.#write(chunk);
    } catch {
      // stdout gone (a closed pipe): the counters still count.
    }
  }
}

/** The surface of an API route, for the `surface` label. */
export function surfaceOf(route: string): string {
  if (route.startsWith('/graphql') || route === '/schema' || route === '/graphiql') return 'graphql';
  if (route.startsWith('/v1/control')) return 'control';
  if (route === '/health' || route === '/metrics') return route.slice(1);
  if (route.startsWith('/auth') || route.startsWith('/.well-known')) return 'identity';
  return route === 'unmatched' ? 'unmatched' : 'rest';
}
