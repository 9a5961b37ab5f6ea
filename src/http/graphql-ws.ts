import { Elysia } from 'elysia';
import { handleProtocols, makeHandler } from 'graphql-ws/use/bun';
import type { Service } from '../service.ts';
import type { RealtimeHub } from '../realtime/hub.ts';
import { hubSource, subscriptionServer, type WsData } from '../realtime/subscriptions.ts';
import { installSubscriptionSource } from '../graphql/subscriptions.ts';

/**
 * GET /graphql/ws: upgrades to graphql-ws's Bun handler. Elysia's Bun adapter dispatches every
 * socket to the `open`/`message`/`close` functions in the socket's data, so an upgrade from a
 * plain route with graphql-ws's handlers in `data` is all it takes.
 */
export function graphqlWsRoutes(svc: Service, hub: RealtimeHub) {
  installSubscriptionSource(svc, hubSource(hub));
  const handler = makeHandler(subscriptionServer(svc, hub) as never);
  const json = (status: number, message: string) =>
    new Response(JSON.stringify({ error: 'BAD_USER_INPUT', message }), { status, headers: { 'content-type': 'application/json' } });
  return new Elysia({ name: 'svc.graphql-ws' }).get('/graphql/ws', ({ request, server }) => {
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket') return json(426, '/graphql/ws is a WebSocket endpoint (graphql-transport-ws)');
    if (!handleProtocols(request.headers.get('sec-websocket-protocol') ?? '')) return json(400, 'Unsupported WebSocket subprotocol; use graphql-transport-ws');
    const data: WsData & Record<string, unknown> = {
      origin: request.headers.get('origin'),
      secFetchSite: request.headers.get('sec-fetch-site'),
      open: (ws: never) => handler.open?.(ws),
      message: (ws: never, m: string | Buffer) => handler.message(ws, m),
      close: (ws: never, code: number, reason: string) => handler.close?.(ws, code, reason),
    };
    if (!server?.upgrade(request, { data })) return json(400, 'WebSocket upgrade failed');
    return undefined;
  });
}
