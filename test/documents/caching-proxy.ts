/**
 * A small shared HTTP cache standing in for a CDN in front of the service (RFC 9111, the parts
 * a GET cache needs): stores `public` answers with `max-age`, keyed by URL and the request
 * headers the answer's `Vary` names; serves them while fresh; once stale, revalidates with
 * `If-None-Match` and keeps its copy on a 304. `x-cache` says what it did.
 */
interface Entry {
  body: string;
  headers: Headers;
  storedAt: number;
  maxAge: number;
  etag: string | null;
  vary: string[];
}

export interface CachingProxy {
  url: string;
  originRequests: number;
  origin304s: number;
  stop(): void;
}

export function startCachingProxy(origin: string): CachingProxy {
  const entries = new Map<string, Entry>();
  const keyOf = (req: Request, vary: string[]) =>
    `${new URL(req.url).pathname}${new URL(req.url).search}\n${vary.map((h) => `${h}=${req.headers.get(h) ?? ''}`).join('\n')}`;
  const varyOf = (h: Headers) =>
    (h.get('vary') ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean);
  const varyByPath = new Map<string, string[]>();
  const state: CachingProxy = { url: '', originRequests: 0, origin304s: 0, stop: () => server.stop(true) };

  const forward = async (req: Request, extra: Record<string, string> = {}) => {
    state.originRequests++;
    const u = new URL(req.url);
    const headers = new Headers(req.headers);
    headers.delete('host');
    for (const [k, v] of Object.entries(extra)) headers.set(k, v);
    return fetch(`${origin}${u.pathname}${u.search}`, { headers });
  };
  const answer = (e: Entry, how: string) => {
    const h = new Headers(e.headers);
    h.set('x-cache', how);
    h.set('age', String(Math.floor((Date.now() - e.storedAt) / 1000)));
    return new Response(e.body, { status: 200, headers: h });
  };
  const store = async (req: Request, res: Response): Promise<Response> => {
    const body = await res.text();
    const cc = res.headers.get('cache-control') ?? '';
    const maxAge = /(?:^|,)\s*max-age=(\d+)/.exec(cc);
    const vary = varyOf(res.headers);
    if (
      res.status === 200 &&
      /(?:^|,)\s*public/.test(cc) &&
      maxAge &&
      !/no-store|private/.test(cc) &&
      !vary.includes('*')
    ) {
      const path = new URL(req.url).pathname + new URL(req.url).search;
      varyByPath.set(path, vary);
      entries.set(keyOf(req, vary), {
        body,
        headers: res.headers,
        storedAt: Date.now(),
        maxAge: Number(maxAge[1]),
        etag: res.headers.get('etag'),
        vary,
      });
    }
    const h = new Headers(res.headers);
    h.set('x-cache', 'MISS');
    return new Response(body, { status: res.status, headers: h });
  };

  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      if (req.method !== 'GET') return forward(req);
      const path = new URL(req.url).pathname + new URL(req.url).search;
      const vary = varyByPath.get(path);
      const e = vary ? entries.get(keyOf(req, vary)) : undefined;
      if (!e) return store(req, await forward(req));
      if (Date.now() - e.storedAt < e.maxAge * 1000) return answer(e, 'HIT');
      if (!e.etag) return store(req, await forward(req));
      const res = await forward(req, { 'if-none-match': e.etag });
      if (res.status === 304) {
        state.origin304s++;
        e.storedAt = Date.now();
        for (const h of ['cache-control', 'etag']) if (res.headers.get(h)) e.headers.set(h, res.headers.get(h)!);
        return answer(e, 'REVALIDATED');
      }
      return store(req, res);
    },
  });
  state.url = `http://127.0.0.1:${server.port}`;
  return state;
}
