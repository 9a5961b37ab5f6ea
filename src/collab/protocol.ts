import * as Y from 'yjs';
import * as encoding from 'lib0/encoding';
import * as decoding from 'lib0/decoding';
import * as syncProtocol from 'y-protocols/sync';
import * as authProtocol from 'y-protocols/auth';

/**
 * The y-websocket wire format (what `WebsocketProvider` speaks), with no I/O: parse a client
 * frame into a typed message, build the frames the server sends. Encoding and decoding go
 * through lib0 and y-protocols; nothing here writes bytes by hand.
 */
export const MESSAGE_SYNC = 0;
export const MESSAGE_AWARENESS = 1;
export const MESSAGE_AUTH = 2;
export const MESSAGE_QUERY_AWARENESS = 3;

/** Close codes of a room socket (4xxx like graphql-ws: the HTTP status they stand for). */
export const CloseCode = {
  /** A frame that is not y-websocket, or an update that does not decode. */
  BadFrame: 4400,
  /** The key or token lost its access while connected. */
  Forbidden: 4403,
  /** The record (or its model) was deleted while the room was open. */
  RecordGone: 4404,
  /** A frame larger than MAX_FRAME_BYTES, or an update a field or the document cannot hold (size.ts). */
  TooLarge: 4413,
  /** The process is shutting down; the client reconnects (to another process). */
  Restart: 1012,
} as const;

/** Largest frame a client may send: far above any keystroke, far below a flood. */
export const MAX_FRAME_BYTES = 2 * 1024 * 1024;

/** An update decoded by Yjs (structs and delete set), kept for the field-rule check. */
export type DecodedUpdate = ReturnType<typeof Y.decodeUpdate>;

export type Frame =
  | { type: 'sync-step1'; stateVector: Uint8Array }
  | { type: 'sync-step2'; update: Uint8Array; decoded: DecodedUpdate }
  | { type: 'update'; update: Uint8Array; decoded: DecodedUpdate }
  | { type: 'awareness'; update: Uint8Array }
  | { type: 'query-awareness' }
  | { type: 'auth' };

export class FrameError extends Error {
  /** The close code of the socket that sent it. */
  readonly code: number = CloseCode.BadFrame;
  constructor(message: string) {
    super(message);
    this.name = 'FrameError';
  }
}

/**
 * Parses one client frame. Updates are decoded in full (Y.decodeUpdate) before anyone applies
 * them: Yjs integrates structs before it reads the delete set, so a frame truncated in its
 * delete set would otherwise be half applied.
 */
export function parseFrame(data: Uint8Array): Frame {
  if (data.byteLength === 0) throw new FrameError('empty frame');
  try {
    const decoder = decoding.createDecoder(data);
    const type = decoding.readVarUint(decoder);
    switch (type) {
      case MESSAGE_SYNC: {
        const sub = decoding.readVarUint(decoder);
        const payload = decoding.readVarUint8Array(decoder);
        if (sub === syncProtocol.messageYjsSyncStep1) {
          Y.decodeStateVector(payload);
          return { type: 'sync-step1', stateVector: payload };
        }
        if (sub === syncProtocol.messageYjsSyncStep2 || sub === syncProtocol.messageYjsUpdate) {
          const decoded = Y.decodeUpdate(payload);
          checkUpdate(decoded);
          return { type: sub === syncProtocol.messageYjsUpdate ? 'update' : 'sync-step2', update: payload, decoded };
        }
        throw new FrameError(`unknown sync message ${sub}`);
      }
      case MESSAGE_AWARENESS:
        return { type: 'awareness', update: decoding.readVarUint8Array(decoder) };
      case MESSAGE_QUERY_AWARENESS:
        return { type: 'query-awareness' };
      case MESSAGE_AUTH:
        return { type: 'auth' };
      default:
        throw new FrameError(`unknown message type ${type}`);
    }
  } catch (err) {
    if (err instanceof FrameError) throw err;
    throw new FrameError('malformed frame');
  }
}

/**
 * Yjs integrates an update's structs one by one and reads its delete set last, so bytes that
 * decode but break an invariant Yjs relies on throw half-way, after part of them is in the
 * document. Two such classes, found by flipping bytes of real updates (1 in ~60 mutations that
 * decode), are refused before anything is applied:
 *  - an item referring (origin, right origin, parent) to a clock of its own client that is not
 *    before its own: a client only ever refers to items that existed when it made the new one,
 *    so to smaller clocks of its own; Yjs looks such a reference up and fails (`mid.id`);
 *  - an empty struct, or structs of one client that are not contiguous (Yjs writes each
 *    client's structs as one run of clocks);
 *  - an empty delete range: Yjs fails on it ("Unexpected case").
 * Room.#apply still treats a failure half-way as fatal for the document (it is discarded).
 */
function checkUpdate(decoded: DecodedUpdate): void {
  let prev: { id: Y.ID; length: number } | null = null;
  for (const s of decoded.structs) {
    const { client, clock } = s.id;
    if (!(s.length > 0)) throw new FrameError('malformed update');
    if (prev && prev.id.client === client && prev.id.clock + prev.length !== clock)
      throw new FrameError('malformed update');
    prev = s;
    if (!(s instanceof Y.Item)) continue;
    // Without an array of the three per struct: this runs for every keystroke.
    if (
      selfAhead(s.origin, client, clock) ||
      selfAhead(s.rightOrigin, client, clock) ||
      (s.parent instanceof Y.ID && selfAhead(s.parent, client, clock))
    ) {
      throw new FrameError('malformed update');
    }
  }
  const ds = decoded.ds as unknown as { clients: Map<number, { clock: number; len: number }[]> };
  for (const items of ds.clients.values())
    for (const it of items) if (!(it.len > 0)) throw new FrameError('malformed delete set');
}

/** A reference to a clock of the item's own client that is not before the item's own. */
function selfAhead(ref: Y.ID | null, client: number, clock: number): boolean {
  return ref !== null && ref.client === client && ref.clock >= clock;
}

export function syncStep1Frame(doc: Y.Doc): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarUint(e, MESSAGE_SYNC);
  syncProtocol.writeSyncStep1(e, doc);
  return encoding.toUint8Array(e);
}

export function syncStep2Frame(doc: Y.Doc, stateVector: Uint8Array): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarUint(e, MESSAGE_SYNC);
  syncProtocol.writeSyncStep2(e, doc, stateVector);
  return encoding.toUint8Array(e);
}

/** Sync step 2 carrying an update encoded before (RoomSync's kept full state). */
export function syncStep2FrameOf(update: Uint8Array): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarUint(e, MESSAGE_SYNC);
  encoding.writeVarUint(e, syncProtocol.messageYjsSyncStep2);
  encoding.writeVarUint8Array(e, update);
  return encoding.toUint8Array(e);
}

export function updateFrame(update: Uint8Array): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarUint(e, MESSAGE_SYNC);
  syncProtocol.writeUpdate(e, update);
  return encoding.toUint8Array(e);
}

export function awarenessFrame(update: Uint8Array): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarUint(e, MESSAGE_AWARENESS);
  encoding.writeVarUint8Array(e, update);
  return encoding.toUint8Array(e);
}

/**
 * y-protocols' auth message "permission denied": what the server tells an editor whose update
 * it refused (WebsocketProvider reports it through its `messageHandlers[2]`, by default a
 * console warning naming the reason).
 */
export function permissionDeniedFrame(reason: string): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarUint(e, MESSAGE_AUTH);
  authProtocol.writePermissionDenied(e, reason);
  return encoding.toUint8Array(e);
}

/** Room names of CONTRACT §10: `<modelKey>:<recordId>:<variantId>`. */
const ROOM_RE = /^([A-Za-z][A-Za-z0-9_]{0,63}):([A-Za-z0-9_-]{1,128}):([A-Za-z0-9_-]{1,64})$/;

export interface RoomName {
  name: string;
  modelKey: string;
  recordId: string;
  variantId: string;
}

export function parseRoomName(name: string): RoomName | null {
  const m = ROOM_RE.exec(name);
  return m ? { name, modelKey: m[1]!, recordId: m[2]!, variantId: m[3]! } : null;
}

export const DEFAULT_VARIANT = 'default';
