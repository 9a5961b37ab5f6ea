/**
 * The `/_events` WebSocket protocol (CONTRACT §10): control frames the client sends, the
 * replies, delivered events, and the close codes. Parse, validate, stringify; no I/O.
 */
export const MAX_FRAME_BYTES = 64 * 1024;

/** Close codes in the 44xx range, after graphql-ws: the HTTP status they stand for plus 4000. */
export enum CloseCode {
  /** Going away: the gateway is draining (SIGTERM); reconnect. */
  ServiceRestart = 1012,
  BadRequest = 4400,
  Unauthorized = 4401,
  Forbidden = 4403,
  /** A frame (or, on /graphql/ws, the documents a socket holds) over its byte limit. */
  PayloadTooLarge = 4413,
  TooManyRequests = 4429,
}

export type ControlFrame = { type: 'subscribe' | 'unsubscribe'; channel: string };

/** Stable codes of error replies. */
export type ErrorCode = 'bad_request' | 'unknown_channel' | 'forbidden' | 'too_many_subscriptions';

export type ServerFrame =
  | { type: 'subscribed' | 'unsubscribed'; channel: string }
  | { type: 'error'; channel: string | null; error: ErrorCode; message: string }
  /** The event bus went away or is back; the socket and its subscriptions stay. */
  | { type: 'bus'; connected: boolean };

/** A delivered event (spec "Gateway event channels"). */
export interface EventFrame {
  channel: string;
  event: string;
  data: Record<string, unknown>;
}

export class FrameError extends Error {
  constructor(
    readonly code: CloseCode,
    message: string,
  ) {
    super(message);
  }
}

/** A control frame, or a FrameError: its code closes the socket (4400 malformed). */
export function parseControlFrame(raw: string | Buffer): ControlFrame {
  const size = typeof raw === 'string' ? Buffer.byteLength(raw) : raw.byteLength;
  if (size > MAX_FRAME_BYTES) throw new FrameError(CloseCode.BadRequest, `Frame exceeds ${MAX_FRAME_BYTES} bytes`);
  let v: unknown;
  try {
    v = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
  } catch {
    throw new FrameError(CloseCode.BadRequest, 'Control frames are JSON objects');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new FrameError(CloseCode.BadRequest, 'Control frames are JSON objects');
  const f = v as Record<string, unknown>;
  if (f.type !== 'subscribe' && f.type !== 'unsubscribe')
    throw new FrameError(CloseCode.BadRequest, 'type must be "subscribe" or "unsubscribe"');
  if (typeof f.channel !== 'string') throw new FrameError(CloseCode.BadRequest, 'channel must be a string');
  return { type: f.type, channel: f.channel };
}

export function stringifyFrame(frame: ServerFrame): string {
  return JSON.stringify(frame);
}

export function stringifyEvent(frame: EventFrame): string {
  return JSON.stringify(frame);
}
