import type { Server } from 'bun';
import { UPGRADED, type GatewayModule, type GatewaySocket, type GatewaySocketData } from '../gateway-module.ts';
import type { RequestLog } from '../metrics/requests.ts';

/**
 * The realtime gateway listener (Bun.serve, whose WebSocket server is uWebSockets with topic
 * pub/sub). Thin: `/health`, then each capability's module in turn (realtime channels,
 * collaboration rooms). A module answers the requests it owns, upgrading the WebSocket ones with
 * `data.kind` set to its name; the one Bun websocket handler dispatches on `ws.data.kind`.
 */
export { UPGRADED, type GatewayModule, type GatewaySocket, type GatewaySocketData } from '../gateway-module.ts';

export interface GatewayOptions {
  port: number;
  hostname: string;
  /** Largest WebSocket frame any module accepts; modules enforce their own smaller bounds. */
  maxPayloadLength?: number;
  /** Bytes queued for one socket before uWebSockets closes it (the slow-consumer drop). */
  backpressureLimit?: number;
  /** Counts and logs each request (surface: the module that answered; 101 for upgrades). */
  requests?: RequestLog;
}

export interface Gateway {
  server: Server<GatewaySocketData>;
  /** Drains every module, then stops the listener. */
  stop(): Promise<void>;
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

export function startGateway(opts: GatewayOptions, modules: readonly GatewayModule[]): Gateway {
  const byKind = new Map(modules.map((m) => [m.name, m]));
  const ws = (s: GatewaySocket) => byKind.get(s.data.kind)?.websocket;
  const server = Bun.serve<GatewaySocketData>({
    port: opts.port,
    hostname: opts.hostname,
    // Idle HTTP connections close after a minute; long-lived responses (SSE) lift it per request
    // with `server.timeout(req, 0)`.
    idleTimeout: 60,
    async fetch(req, srv) {
      const url = new URL(req.url);
      const log = opts.requests;
      log?.start(req);
      const done = (surface: string, status: number) => {
        // The route is the first path segment (`/sse/:name`): bounded, unlike the raw path.
        const [, first, rest] = /^\/([^/]*)(\/.*)?$/.exec(url.pathname) ?? [];
        const route = surface === 'unmatched' ? 'unmatched' : `/${first ?? ''}${rest ? '/:name' : ''}`;
        log?.done(req, { method: req.method, surface, route, path: url.pathname, status, ms: log.elapsed(req) });
      };
      if (req.method === 'GET' && url.pathname === '/health') {
        done('health', 200);
        return json({ status: 'ok' });
      }
      for (const m of modules) {
        const res = await m.fetch(req, url, srv);
        if (res === UPGRADED) {
          done(m.name, 101);
          return undefined as unknown as Response;
        }
        if (res) {
          done(m.name, res.status);
          return res;
        }
      }
      done('unmatched', 404);
      return json({ error: 'NOT_FOUND', message: 'No such endpoint' }, 404);
    },
    websocket: {
      maxPayloadLength: opts.maxPayloadLength ?? 16 * 1024 * 1024,
      backpressureLimit: opts.backpressureLimit ?? 1024 * 1024,
      closeOnBackpressureLimit: true,
      open: (s) => ws(s)?.open?.(s),
      message: (s, m) => ws(s)?.message?.(s, m),
      drain: (s) => ws(s)?.drain?.(s),
      close: (s, code, reason) => ws(s)?.close?.(s, code, reason),
    },
    error(err) {
      console.error('gateway request failed:', err instanceof Error ? err.message : err);
      return json({ error: 'INTERNAL_SERVER_ERROR', message: 'Internal server error' }, 500);
    },
  });
  for (const m of modules) m.started?.(server);
  let stopping: Promise<void> | undefined;
  return {
    server,
    stop() {
      stopping ??= (async () => {
        await Promise.all(modules.map((m) => Promise.resolve(m.drain?.()).catch(() => {})));
        await server.stop(true);
      })();
      return stopping;
    },
  };
}
