import { Elysia } from 'elysia';
import { handleProtocols, makeHandler } from 'graphql-ws/use/bun';
import type { Service } from '../service.ts';
import type { RealtimeHub } from '../realtime/hub.ts';
import { hubSource, subscriptionServer, type WsData } from '../realtime/subscriptions.ts';
import { installSubscriptionSource } from '../graphql/subscriptions.ts';
import { LIMITS } from '../graphql/limits.ts';
import { CloseCode } from '../realtime/protocol/frames.ts';

/** A /graphql/ws frame may be as large as a POST /graphql body, and is refused unparsed past it. */
export const MAX_WS_FRAME_BYTES = LIMITS.maxBodyBytes;

/** UTF-8 bytes of a text frame (its length is a lower bound: measured only when it may be over). */
function frameBytes(m: string | Buffer): number {
  if (typeof m !== 'string') return m.byteLength;
  return m.length * 3 <= MAX_WS_FRAME_BYTES ? m.length : Buffer.byteLength(m);
}

/**
 * GET /graphql/ws: upgrades to graphql-ws's Bun handler. Elysia's Bun adapter dispatches every
 * socket to the `open`/`message`/`close` functions in the socket's data, so an upgrade from a
 * plain route with graphql-ws's handlers in `data` is all it takes.
 */
export function graphqlWsRoutes(svc: Service, hub: RealtimeHub) {
  installSubscriptionSource(svc, hubSource(hub));
  const handler = makeHandler(subscriptionServer(svc, hub) as never);
  const json = (status: number, message: string) =>
    new Response(JSON.stringify({ error: 'BAD_USER_INPUT', message }), {
      status,
      headers: { 'content-type': 'application/json' },
    });
  return new Elysia({ name: 'svc.graphql-ws' }).get('/graphql/ws', ({ request, server }) => {
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket')
      return json(426, '/graphql/ws is a WebSocket endpoint (graphql-transport-ws)');
    if (!handleProtocols(request.headers.get('sec-websocket-protocol') ?? ''))
      return json(400, 'Unsupported WebSocket subprotocol; use graphql-transport-ws');
    const data: WsData & Record<string, unknown> = {
      origin: request.headers.get('origin'),
      secFetchSite: request.headers.get('sec-fetch-site'),
      open: (ws: never) => handler.open?.(ws),
      // Measured before graphql-ws parses it (JSON.parse of a 12 MiB frame was the attack).
      message: (ws: { close(code: number, reason: string): void }, m: string | Buffer) => {
        if (frameBytes(m) > MAX_WS_FRAME_BYTES)
          return ws.close(CloseCode.PayloadTooLarge, `Message exceeds ${MAX_WS_FRAME_BYTES} bytes`);
        // graphql-ws rejects for a well-formed message a server does not take (`next` from a
        // client): a protocol error, not an unhandled rejection of the process.
        return handler.message(ws as never, m)?.catch((err: unknown) => {
          const unexpected = err instanceof Error && err.message.startsWith('Unexpected message');
          if (!unexpected) console.error('graphql-ws message failed:', err instanceof Error ? err.message : err);
          ws.close(
            unexpected ? CloseCode.BadRequest : 1011,
            unexpected ? 'Invalid message received' : 'Internal error',
          );
        });
      },
      close: (ws: never, code: number, reason: string) => handler.close?.(ws, code, reason),
    };
    if (!server?.upgrade(request, { data })) return json(400, 'WebSocket upgrade failed');
    return undefined;
  });
}
