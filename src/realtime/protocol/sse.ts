/**
 * Server-sent events framing (HTML Living Standard §9.2): an event is `id:`, optional `event:`
 * and `data:` lines closed by a blank line; a line starting with `:` is a comment. Payloads are
 * single-line JSON, so one `data:` line always suffices. No I/O.
 */
const enc = new TextEncoder();

export const HEARTBEAT = enc.encode(': heartbeat\n\n');

export function connectedFrame(channel: string): Uint8Array {
  return enc.encode(`event: connected\ndata: ${JSON.stringify({ channel })}\n\n`);
}

/**
 * The event bus went away (`connected: false`) or is back: the stream stays open and events
 * committed meanwhile follow once it is back. An `event: bus` frame, so `onmessage` ignores it.
 */
export function busFrame(connected: boolean): Uint8Array {
  return enc.encode(`event: bus\ndata: ${JSON.stringify({ connected })}\n\n`);
}

/** One delivered event, encoded once and written as is to every stream of the channel. */
export function dataFrame(id: string, json: string): Uint8Array {
  return enc.encode(`id: ${id}\ndata: ${json}\n\n`);
}

export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * Splits a received buffer into complete messages (the load generator's parser); returns the
 * unfinished tail to prepend to the next chunk. Comments are dropped.
 */
export function parseSse(buffer: string): { messages: SseMessage[]; rest: string } {
  const messages: SseMessage[] = [];
  let start = 0;
  for (;;) {
    const end = buffer.indexOf('\n\n', start);
    if (end < 0) break;
    const block = buffer.slice(start, end);
    start = end + 2;
    let id: string | undefined;
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
      if (field === 'id') id = value;
      else if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length) messages.push({ id, event, data: data.join('\n') });
  }
  return { messages, rest: buffer.slice(start) };
}
