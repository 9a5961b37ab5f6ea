import type { Server, ServerWebSocket } from 'bun';
import { UPGRADED, type GatewayModule, type GatewaySocketData } from '../gateway-module.ts';
import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, NotFound, PermissionDenied, SvcError, errorBody, toSvcError } from '../errors.ts';
import { CloseCode, MAX_FRAME_BYTES, parseRoomName } from './protocol.ts';
import type { Conn, Room } from './room.ts';
import type { CollabRooms } from './rooms.ts';
import { recordExists } from './store.ts';
import { unreadableFields, writeRule, type Access } from './access.ts';
import type { WriteRule } from './guard.ts';

/**
 * Collaboration rooms on the realtime gateway: the upgrade route `/{modelKey}:{recordId}:{variantId}`
 * (CONTRACT §10), `GET /api/collab/room-status/{room}`, and the socket handlers. The socket is
 * accepted only after every check, so a refusal is a plain HTTP answer (400/401/403/404/429).
 */
export interface Joiner {
  /** Counts against the room limit: `key:<id>` or `customer:<id>`. */
  identity: string;
  /** Recorded as the editor (`userId` of events and history). */
  userId: string;
  projectId: string;
  /** Write, read (awareness only) or null (refused) for a record of a model, with the joiner's principals. */
  access(model: ModelDef, recordId: string): Access | null | Promise<Access | null>;
}

/** Resolves the `token` / `apiKey` (+ `projectId`) query parameters of an upgrade. */
export type JoinAuth = (req: Request, url: URL) => Promise<Joiner>;

export interface CollabSocketData {
  kind: 'collab';
  key: string;
  identity: string;
  userId: string;
  rule: WriteRule;
  conn?: Conn;
  room?: Room;
  /** Frames that arrived before the room was attached (bounded). */
  queue: Uint8Array[] | null;
  closed: boolean;
}

type Socket = ServerWebSocket<CollabSocketData>;
const MAX_QUEUED = 64;
/** Seconds a client refused by the room limit should wait (rooms free when editors leave). */
export const ROOM_LIMIT_RETRY_AFTER = 30;

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });
}

function errorResponse(err: unknown): Response {
  if (!(err instanceof SvcError)) console.error('collab join failed:', err instanceof Error ? err.message : err);
  const e = toSvcError(err);
  const headers: Record<string, string> = {};
  if (e.details && typeof e.details.retryAfter === 'number') headers['retry-after'] = String(e.details.retryAfter);
  return json(errorBody(e), e.status, headers);
}

/** `readOnly=1` (or `true`): the joiner asks for read-only presence (docs/collab.md). */
export function wantsReadOnly(url: URL): boolean {
  const v = url.searchParams.get('readOnly');
  return v === '1' || v === 'true';
}

export function collabGateway(rooms: CollabRooms, auth: JoinAuth): GatewayModule<CollabSocketData> {
  return {
    name: 'collab',
    started(server: { publish(topic: string, data: Uint8Array): unknown }) {
      rooms.attachServer(server);
    },
    drain: () => rooms.drain(),
    async fetch(
      req: Request,
      url: URL,
      server: Server<GatewaySocketData>,
    ): Promise<Response | typeof UPGRADED | undefined> {
      const path = url.pathname;
      if (path.startsWith('/api/collab/room-status/')) {
        if (req.method !== 'GET') return undefined;
        const name = safeDecode(path.slice('/api/collab/room-status/'.length));
        if (!name || !parseRoomName(name))
          return errorResponse(new BadUserInput('A room name has the form <modelKey>:<recordId>:<variantId>'));
        return json(await rooms.status(name));
      }
      const name = safeDecode(path.slice(1));
      if (!name || !name.includes(':') || name.includes('/')) return undefined;
      try {
        if (!parseRoomName(name)) throw new BadUserInput('A room name has the form <modelKey>:<recordId>:<variantId>');
        if (req.headers.get('upgrade')?.toLowerCase() !== 'websocket')
          throw new BadUserInput('A collaboration room is a WebSocket: send an upgrade request');
        const joiner = await auth(req, url);
        const { info } = await rooms.resolve(joiner.projectId, name);
        const granted = await joiner.access(info.model, info.recordId);
        // Spec error table: joining without write access is 403. Read-only presence (awareness
        // and live edits, no changes) is an explicit opt-in of the client: `readOnly=1`.
        const readOnly = wantsReadOnly(url);
        if (!granted || (granted.mode === 'read' && !readOnly)) {
          throw new PermissionDenied(
            granted
              ? 'Joining this room needs write access to the record (add readOnly=1 to join read-only)'
              : 'Joining this room needs write access to the record',
          );
        }
        const access: Access = readOnly ? { ...granted, mode: 'read' } : granted;
        const hidden = unreadableFields(info.model, access.principals);
        if (hidden.length > 0)
          throw new PermissionDenied(`A room shows every field; this caller may not read: ${hidden.join(', ')}`);
        if (!(await recordExists(rooms.sql, info.projectId, info.model.key, info.recordId)))
          throw new NotFound('No such record');
        const limit = await rooms.checkLimit(joiner.identity, info.key);
        if (!limit.ok) {
          return json({ error: 'room_limit_exceeded', limit: rooms.roomLimit, held: limit.held }, 429, {
            'retry-after': String(ROOM_LIMIT_RETRY_AFTER),
          });
        }
        rooms.hold(joiner.identity, info.key);
        const data: CollabSocketData = {
          kind: 'collab',
          key: info.key,
          identity: joiner.identity,
          userId: joiner.userId,
          rule: writeRule(info.model, access),
          queue: [],
          closed: false,
        };
        if (!server.upgrade(req, { data })) {
          rooms.release(joiner.identity, info.key);
          throw new BadUserInput('WebSocket upgrade failed');
        }
        return UPGRADED;
      } catch (err) {
        return errorResponse(err);
      }
    },
    websocket: {
      async open(ws: Socket) {
        const d = ws.data;
        const conn: Conn = { ws, userId: d.userId, rule: d.rule, awarenessIds: new Set() };
        d.conn = conn;
        try {
          // The room may unload between the join check and this open: get a live one.
          for (;;) {
            const room = await rooms.room(d.key);
            if (d.closed) return;
            if (room.join(conn)) {
              d.room = room;
              break;
            }
          }
        } catch (err) {
          const gone = err instanceof SvcError && err.status === 404;
          if (!gone) console.error('collab room load failed:', err instanceof Error ? err.message : err);
          ws.close(gone ? CloseCode.RecordGone : CloseCode.Restart, gone ? 'record not found' : 'room unavailable');
          return;
        }
        const queued = d.queue ?? [];
        d.queue = null;
        for (const f of queued) d.room.frame(conn, f);
      },
      message(ws: Socket, message: string | Buffer) {
        const d = ws.data;
        if (typeof message === 'string') return ws.close(CloseCode.BadFrame, 'expected binary y-websocket frames');
        if (message.byteLength > MAX_FRAME_BYTES) return ws.close(CloseCode.TooLarge, 'frame too large');
        // No copy: Bun hands each message its own buffer, never reused for a later one
        // (test/collab/frame-buffer.test.ts), so the room may keep it (mailbox, relay batch).
        // The copy was one allocation and one ArrayBuffer materialisation per keystroke.
        if (d.room) d.room.frame(d.conn!, message);
        else if (d.queue && d.queue.length < MAX_QUEUED) d.queue.push(message);
        else ws.close(CloseCode.BadFrame, 'too many frames before the room opened');
      },
      close(ws: Socket) {
        const d = ws.data;
        if (d.closed) return;
        d.closed = true;
        if (d.room && d.conn) d.room.leave(d.conn);
        rooms.release(d.identity, d.key);
      },
    },
  };
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}
