import type { Server } from 'bun';
import type { Service } from '../service.ts';

/**
 * The realtime gateway listener (Bun.serve, whose WebSocket server is uWebSockets with topic
 * pub/sub). Channels, SSE and collaboration rooms plug into `GatewayState` in later issues.
 */
export interface GatewayState {
  channels(): number;
  clients(): number;
}

export function startGateway(svc: Service, opts: { port: number; hostname: string }, state: GatewayState = { channels: () => 0, clients: () => 0 }): Server<unknown> {
  const json = (body: unknown, status = 200) =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  return Bun.serve({
    port: opts.port,
    hostname: opts.hostname,
    fetch(req) {
      const url = new URL(req.url);
      if (req.method === 'GET' && url.pathname === '/health') return json({ status: 'ok' });
      if (req.method === 'GET' && url.pathname === '/api/realtime/status') {
        return json({ channels: state.channels(), clients: state.clients() });
      }
      return json({ error: 'NOT_FOUND', message: 'No such endpoint' }, 404);
    },
    error() {
      return json({ error: 'INTERNAL_SERVER_ERROR', message: 'Internal server error' }, 500);
    },
  });
}
