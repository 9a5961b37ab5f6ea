import { Elysia } from 'elysia';
import { PayloadTooLarge } from '../errors.ts';
import { LIMITS } from '../graphql/limits.ts';

/**
 * Request bodies are read as a stream and counted, so a body over its route's limit is refused
 * after `limit` bytes, never buffered in full (a 50 MB chunked body costs 1 MB of reading).
 * A declared Content-Length over the limit is refused before a byte is read; a declared length
 * within it needs no counting (HTTP framing ends the body there). Chunked bodies pass through a
 * counting stream that fails at the limit, which cancels the socket read.
 *
 * Applied to every request of the API listener (`bodyLimits`), before Elysia or a route reads
 * the body, so every route, present or future, gets it: Elysia's own parsers and routes that
 * read `request` themselves both see the limited stream. A consumer then fails with
 * PayloadTooLarge (as the cause of Elysia's parse error), which the error boundaries answer 413.
 */

/** Control-plane bodies (config pushes are the largest). */
export const CONTROL_BODY_LIMIT = 10 * 1024 * 1024;

/** The limit of a path: GraphQL documents are held to LIMITS.maxBodyBytes (docs/graphql.md). */
export function bodyLimitFor(path: string): number {
  return path === '/graphql' ? LIMITS.maxBodyBytes : CONTROL_BODY_LIMIT;
}

function tooLarge(limit: number): PayloadTooLarge {
  return new PayloadTooLarge(`The request body exceeds ${limit} bytes`, { limit });
}

/** The same request with a body that cannot yield more than `limit` bytes. */
export function limitBody(request: Request, limit: number): Request {
  if (request.method === 'GET' || request.method === 'HEAD') return request;
  const declared = request.headers.get('content-length');
  if (declared !== null && declared.trim() !== '') {
    const n = Number(declared);
    if (Number.isFinite(n) && n <= limit) return request;
    const refused = new ReadableStream<Uint8Array>({ start: (c) => c.error(tooLarge(limit)) });
    return new Request(request, { body: refused, duplex: 'half' } as RequestInit);
  }
  if (!request.body) return request;
  let seen = 0;
  const counter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, ctl) {
      seen += chunk.byteLength;
      if (seen > limit) ctl.error(tooLarge(limit));
      else ctl.enqueue(chunk);
    },
  });
  return new Request(request, { body: request.body.pipeThrough(counter), duplex: 'half' } as RequestInit);
}

/** Reads a body as text, at most `limit` bytes (for handlers that read the request themselves). */
export async function readBodyText(request: Request, limit: number): Promise<string> {
  return limitBody(request, limit).text();
}

/**
 * The path of a request URL as `new URL(url).pathname` gives it. A path without `%`, `\\` or `.`
 * is already in that form and is sliced out (~0.5 µs a request less); any other goes through the
 * URL parser, which decodes and resolves it like the router's view of it.
 */
export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  const q = url.indexOf('?');
  if (start < 0 || (q >= 0 && q < start) || url.lastIndexOf('#', start) >= 0) return new URL(url).pathname;
  let end = url.indexOf('?', start);
  const hash = url.indexOf('#', start);
  if (hash >= 0 && (end < 0 || hash < end)) end = hash;
  const path = end < 0 ? url.slice(start) : url.slice(start, end);
  return /[%\\.]/.test(path) ? new URL(url).pathname : path;
}

/**
 * Puts every request of the app behind its route's body limit (see above). The limited request
 * is a new object: `replaced` lets per-request bookkeeping keyed by the original follow it.
 */
export function bodyLimits(
  opts: { limitFor?: (path: string) => number; replaced?: (from: Request, to: Request) => void } = {},
) {
  const limitFor = opts.limitFor ?? bodyLimitFor;
  return new Elysia({ name: 'svc.body' }).onRequest((ctx) => {
    const { request } = ctx;
    if (request.method === 'GET' || request.method === 'HEAD') return;
    const limited = limitBody(request, limitFor(pathOf(request.url)));
    if (limited === request) return;
    opts.replaced?.(request, limited);
    (ctx as { request: Request }).request = limited;
  });
}
