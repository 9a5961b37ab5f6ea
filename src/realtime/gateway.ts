import type { Server } from 'bun';
import { UPGRADED, type GatewayModule, type GatewaySocket, type GatewaySocketData } from '../gateway-module.ts';
import { errorBody, NotFound, SvcError, toSvcError } from '../errors.ts';
import {
  authenticateGateway,
  authorizeChannel,
  credentialsOf,
  hubIdentity,
  type RealtimeIdentity,
  type RealtimeDeps,
} from './auth.ts';
import type { VerifyToken } from '../identity/token-only.ts';
import { TooManyConnections, type RealtimeHub } from './hub.ts';
import type { ChannelActor, SseSink } from './channel.ts';
import { parseChannel } from './protocol/channels.ts';
import { CloseCode, FrameError, parseControlFrame, stringifyFrame, type ErrorCode } from './protocol/frames.ts';
import { busFrame, connectedFrame, HEARTBEAT } from './protocol/sse.ts';

/**
 * The realtime part of the gateway: `/api/realtime/status`, `/sse/{channel}` and the
 * `/_events` WebSocket (sockets with `kind: 'events'`). Thin: credentials and channel rules
 * come from ./auth.ts, delivery from the channel actors of ./hub.ts, wire formats from
 * ./protocol.
 */
interface EventsSocket extends GatewaySocketData {
  kind: 'events';
  who: RealtimeIdentity;
  /** Per subscribed channel, its actor and the topic the socket subscribed to (a `changes:*` view's, or the channel's). */
  channels: Map<string, { actor: ChannelActor; topic: string }>;
  /** Control frames handled one after another, so replies keep the order of the requests. */
  chain: Promise<void>;
  frames: number;
  windowStart: number;
  release: () => void;
  socket: GatewaySocket<EventsSocket> | undefined;
}

/** Control frames a socket may send per 10-second window before it is closed with 4429. */
const FRAMES_PER_WINDOW = 200;
const WINDOW_MS = 10_000;

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });
}

function refusal(err: unknown): Response {
  if (err instanceof TooManyConnections)
    return json({ error: 'connection_limit_exceeded', message: err.message, limit: err.limit, held: err.held }, 429, {
      'retry-after': '5',
    });
  const e = toSvcError(err);
  if (!(err instanceof SvcError)) console.error('realtime request failed:', err instanceof Error ? err.message : err);
  return json(errorBody(e), e.status);
}

function errorCode(err: unknown): ErrorCode {
  return err instanceof NotFound ? 'unknown_channel' : 'forbidden';
}

/** `verifyToken` checks a customer token given without a key (src/identity's verifyAccessToken). */
export function realtimeGateway(
  svc: RealtimeDeps,
  hub: RealtimeHub,
  verifyToken: VerifyToken,
): GatewayModule<EventsSocket> {
  const sseStreams = new Set<() => void>();
  const heartbeat = setInterval(() => {
    for (const beat of sseStreams) beat();
  }, hub.options.heartbeatMs);
  heartbeat.unref?.();

  async function sse(req: Request, url: URL, server: Server<GatewaySocketData>): Promise<Response> {
    let name: string;
    try {
      name = decodeURIComponent(url.pathname.slice('/sse/'.length));
    } catch {
      name = '';
    }
    const channel = parseChannel(name);
    try {
      const who = await authenticateGateway(svc, verifyToken, credentialsOf(req, url));
      if (!channel) throw new NotFound('Unknown channel');
      const models = await authorizeChannel(svc, who, channel);
      const actor = await hub.channel(who.projectId, channel);
      const lastEventId = req.headers.get('last-event-id') ?? url.searchParams.get('lastEventId');
      const limit = hub.options.sseBufferBytes;
      let controller!: ReadableStreamDefaultController<Uint8Array>;
      let open = true;
      let release = () => {};
      const end = () => {
        if (!open) return;
        open = false;
        actor.removeStream(sink);
        sseStreams.delete(beat);
        release();
      };
      const sink: SseSink = {
        write(bytes) {
          if (!open) return false;
          // A slow consumer: its queue passed the bound, so it is dropped instead of growing.
          if ((controller.desiredSize ?? 0) < -limit) {
            end();
            controller.error(new Error('slow consumer'));
            return false;
          }
          controller.enqueue(bytes);
          return true;
        },
      };
      const beat = () => void sink.write(HEARTBEAT);
      const stream = new ReadableStream<Uint8Array>(
        {
          start(c) {
            controller = c;
          },
          cancel: end,
        },
        { highWaterMark: 0, size: (chunk) => chunk?.byteLength ?? 0 },
      );
      release = hub.register({
        ...hubIdentity(svc, who, verifyToken),
        close() {
          if (!open) return;
          end();
          controller.close();
        },
        linked: (up) => void sink.write(busFrame(up)),
      });
      controller.enqueue(connectedFrame(channel.name));
      actor.addStream(sink, lastEventId, (id) => hub.replay(who.projectId, channel.name, id), models);
      sseStreams.add(beat);
      // The stream stays open between heartbeats: no idle timeout for this request.
      server.timeout(req, 0);
      return new Response(stream, {
        headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
      });
    } catch (err) {
      return refusal(err);
    }
  }

  async function upgradeEvents(
    req: Request,
    url: URL,
    server: Server<GatewaySocketData>,
  ): Promise<Response | typeof UPGRADED> {
    if (req.headers.get('upgrade')?.toLowerCase() !== 'websocket')
      return json({ error: 'BAD_USER_INPUT', message: '/_events is a WebSocket endpoint' }, 426);
    let release: (() => void) | undefined;
    try {
      const who = await authenticateGateway(svc, verifyToken, credentialsOf(req, url));
      const data: EventsSocket = {
        kind: 'events',
        who,
        channels: new Map(),
        chain: Promise.resolve(),
        frames: 0,
        windowStart: Date.now(),
        release: () => {},
        socket: undefined,
      };
      release = hub.register({
        ...hubIdentity(svc, who, verifyToken),
        close: (code, reason) => data.socket?.close(code, reason),
        linked: (up) => void data.socket?.send(stringifyFrame({ type: 'bus', connected: up })),
      });
      data.release = release;
      if (!server.upgrade(req, { data })) throw new Error('upgrade failed');
      return UPGRADED;
    } catch (err) {
      release?.();
      return refusal(err);
    }
  }

  async function control(ws: GatewaySocket<EventsSocket>, raw: string | Buffer): Promise<void> {
    const d = ws.data;
    const now = Date.now();
    if (now - d.windowStart > WINDOW_MS) {
      d.windowStart = now;
      d.frames = 0;
    }
    if (++d.frames > FRAMES_PER_WINDOW) return ws.close(CloseCode.TooManyRequests, 'Too many control frames');
    let frame: ReturnType<typeof parseControlFrame>;
    try {
      frame = parseControlFrame(raw);
    } catch (err) {
      return ws.close(err instanceof FrameError ? err.code : CloseCode.BadRequest, (err as Error).message);
    }
    const reply = (f: Parameters<typeof stringifyFrame>[0]) => void ws.send(stringifyFrame(f));
    if (frame.type === 'unsubscribe') {
      const sub = d.channels.get(frame.channel);
      if (sub) {
        d.channels.delete(frame.channel);
        ws.unsubscribe(sub.topic);
        sub.actor.removeSocket(sub.topic);
      }
      return reply({ type: 'unsubscribed', channel: frame.channel });
    }
    if (d.channels.has(frame.channel)) return reply({ type: 'subscribed', channel: frame.channel });
    const channel = parseChannel(frame.channel);
    if (!channel)
      return reply({ type: 'error', channel: frame.channel, error: 'unknown_channel', message: 'Unknown channel' });
    if (d.channels.size >= hub.options.maxSubscriptionsPerConnection) {
      return reply({
        type: 'error',
        channel: frame.channel,
        error: 'too_many_subscriptions',
        message: `At most ${hub.options.maxSubscriptionsPerConnection} channels per connection`,
      });
    }
    let models: ReadonlySet<string> | null;
    try {
      models = await authorizeChannel(svc, d.who, channel);
    } catch (err) {
      const e = toSvcError(err);
      return reply({ type: 'error', channel: frame.channel, error: errorCode(err), message: e.message });
    }
    const actor = await hub.channel(d.who.projectId, channel);
    if (ws.readyState !== 1) return;
    const topic = actor.addSocket(models);
    d.channels.set(frame.channel, { actor, topic });
    ws.subscribe(topic);
    reply({ type: 'subscribed', channel: frame.channel });
  }

  return {
    name: 'events',
    fetch(req, url, server) {
      if (req.method !== 'GET') return undefined;
      if (url.pathname === '/api/realtime/status') return json(hub.status());
      if (url.pathname.startsWith('/sse/')) return sse(req, url, server);
      if (url.pathname === '/_events') return upgradeEvents(req, url, server);
      return undefined;
    },
    started(server) {
      hub.setPublisher((topic, text) => void server.publish(topic, text));
    },
    websocket: {
      open(ws) {
        ws.data.socket = ws;
      },
      message(ws, raw) {
        ws.data.chain = ws.data.chain
          .then(() => control(ws, raw))
          .catch((err) => {
            console.error('realtime control frame failed:', err instanceof Error ? err.message : err);
            ws.close(1011, 'Internal error');
          });
      },
      close(ws) {
        ws.data.release();
        for (const { actor, topic } of ws.data.channels.values()) actor.removeSocket(topic);
        ws.data.channels.clear();
      },
    },
    drain() {
      clearInterval(heartbeat);
      hub.drain();
    },
  };
}
