import { createHash } from 'node:crypto';
import { toSvcError } from '../errors.ts';
import { projectSurrogateKey } from '../graphql/cdn-purge.ts';
import { maskError, maskErrors } from '../graphql/errors.ts';
import { Lru } from '../graphql/lru.ts';
import type { Executed } from '../graphql/response-cache.ts';

/**
 * The answers of GraphQL over HTTP (spec "GraphQL over HTTP", CONTRACT §6): media type from the
 * Accept header, status, body, and the headers of an executed operation — Cache-Control and Vary,
 * and for a shareable GET the ETag, If-None-Match → 304 and the surrogate keys (docs/graphql.md,
 * "HTTP caching").
 */
export const VARY = 'x-api-key, X-Project-Id';

/**
 * The media type of the answer, from the request's Accept header (GraphQL over HTTP,
 * "Accept"): `graphql-response` when the client prefers application/graphql-response+json (a
 * request error, an answer without `data`, is then a 400); `json` when it asks for
 * application/json (every well-formed request is then a 200, errors in the body); `legacy`
 * without an Accept header or with only wildcards: application/json, 400 for documents refused
 * before execution (what this service always answered; docs/graphql.md).
 */
export type Media = 'graphql-response' | 'json' | 'legacy';
const GRAPHQL_RESPONSE = 'application/graphql-response+json';

/**
 * Answers per Accept value: clients send the same one or two values on every request, and the
 * parse (split, trim, a map and a find per part) cost ~1.5 µs of a mutation's samples. Values up
 * to 256 characters, 64 of them.
 */
const negotiated = new Lru<string, Media>(64);

export function negotiate(accept: string | null): Media {
  // No header, or what fetch() sends by default: no lookup at all.
  if (!accept || accept === '*/*') return 'legacy';
  let media = negotiated.get(accept);
  if (media === undefined) {
    media = parseAccept(accept);
    if (accept.length <= 256) negotiated.set(accept, media);
  }
  return media;
}

function parseAccept(accept: string): Media {
  let gr = -1;
  let js = -1;
  for (const part of accept.split(',')) {
    const [type, ...params] = part.trim().toLowerCase().split(';');
    const qp = params.map((x) => x.trim()).find((x) => x.startsWith('q='));
    const q = qp ? Number(qp.slice(2)) : 1;
    if (!(q > 0)) continue;
    if (type === GRAPHQL_RESPONSE) gr = Math.max(gr, q);
    else if (type === 'application/json') js = Math.max(js, q);
  }
  if (gr >= 0 && gr >= js) return 'graphql-response';
  return js >= 0 ? 'json' : 'legacy';
}

const CONTENT_TYPE = {
  'graphql-response': `${GRAPHQL_RESPONSE}; charset=utf-8`,
  json: 'application/json; charset=utf-8',
  legacy: 'application/json; charset=utf-8',
} as const;

/**
 * The fixed headers of an answer, per media type, Cache-Control value and rate-limit window
 * (limit and reset of the key's window): built once and handed to the Response, which copies
 * them, so an executed operation's answer sets one header of its own (`x-ratelimit-remaining`).
 * Six `headers.set` calls were ~1.3 µs a request, a copy of prepared Headers and one set ~0.5 µs
 * (Bun 1.4, this box; bench/NOTES.md, issue 31). Looked up by the strings' identity-hashed Map
 * keys and numbers, never a key string built per request; bounded (past the bound, built anew).
 */
const MAX_FIXED = 256;
interface Fixed {
  headers: Headers;
  /** The same plus x-ratelimit-limit and -reset, by limit and then reset (whole seconds). */
  rated: Map<number, Map<number, Headers>>;
  size: number;
}
const fixedHeaders: Record<Media, Map<string | undefined, Fixed>> = {
  'graphql-response': new Map(),
  json: new Map(),
  legacy: new Map(),
};
let fixedCount = 0;

function fixed(media: Media, cacheControl: string | undefined): Fixed {
  const byCc = fixedHeaders[media];
  let f = byCc.get(cacheControl);
  if (f === undefined) {
    const headers = new Headers({ 'content-type': CONTENT_TYPE[media] });
    if (cacheControl !== undefined) {
      headers.set('cache-control', cacheControl);
      if (cacheControl.startsWith('public')) headers.set('vary', VARY);
    }
    f = { headers, rated: new Map(), size: 0 };
    if (fixedCount < MAX_FIXED) {
      byCc.set(cacheControl, f);
      fixedCount++;
    }
  }
  return f;
}

function rated(f: Fixed, rate: RateHeaders): Headers {
  let byReset = f.rated.get(rate.limit);
  let h = byReset?.get(rate.reset);
  if (h === undefined) {
    h = new Headers(f.headers);
    h.set('x-ratelimit-limit', String(rate.limit));
    h.set('x-ratelimit-reset', String(rate.reset));
    // A window's headers are done with when it ends: one window per limit is kept.
    if (f.size >= MAX_FIXED) {
      f.rated.clear();
      f.size = 0;
      byReset = undefined;
    }
    if (!byReset) f.rated.set(rate.limit, (byReset = new Map()));
    else byReset.clear();
    byReset.set(rate.reset, h);
    f.size++;
  }
  return h;
}

/** The rate limit of the request's key (gate.chargeNow): on every answer made with a key. */
export interface RateHeaders {
  limit: number;
  remaining: number;
  reset: number;
}

/**
 * An answer: its content type, then (for executed operations) `cache-control` and, for a
 * shareable answer, `vary`, the key's rate-limit headers, then `headers` (errors' extras, a
 * write's LSN).
 */
export function json(
  status: number,
  body: string,
  headers: Record<string, string> | null,
  media: Media = 'legacy',
  cacheControl?: string,
  rate?: RateHeaders | null,
): Response {
  const f = fixed(media, cacheControl);
  const res = new Response(body, { status, headers: rate ? rated(f, rate) : f.headers });
  const h = res.headers;
  if (rate) h.set('x-ratelimit-remaining', String(rate.remaining));
  if (headers) for (const name in headers) h.set(name, headers[name]!);
  return res;
}

/** The status of one executed (or refused) operation under the negotiated media type. */
export function statusOf(r: Executed, media: Media): number {
  if (media === 'json') return 200;
  if (media === 'graphql-response')
    return r.rejected || (r.body === undefined && r.result.data === undefined) ? 400 : 200;
  return r.rejected ? 400 : 200;
}

/** Failures before execution still answer in GraphQL's shape, with the error's HTTP status. */
export function failure(
  err: unknown,
  production: boolean,
  media: Media = 'legacy',
  rate?: RateHeaders | null,
): Response {
  const e = toSvcError(err);
  // maskError logs and masks anything that is not an SvcError.
  const body = JSON.stringify({ errors: [maskError(err as Error, production)] });
  return json(e.status, body, e.headers ?? null, media, 'no-store', rate);
}

/** The JSON text of one answer: as the core made it, or with its errors masked here. */
export function bodyOf(x: Executed, production: boolean): string {
  if (x.body !== undefined) return x.body;
  const { data, errors } = x.result;
  if (!errors?.length) return JSON.stringify(x.result);
  const masked = maskErrors(errors, production);
  return JSON.stringify(data === undefined ? { errors: masked } : { errors: masked, data });
}

/**
 * HTTP caching of a shareable GET answer (docs/graphql.md, "HTTP caching"): a strong ETag (the
 * body's SHA-256), surrogate keys a CDN can purge by (the project, and the trusted document), and
 * `Vary` on every request header the answer depends on (key, project, a customer token, the
 * negotiated media type). Made once per answer and remembered for response-cache entries, which
 * are reused (an answer is one project's and names one document or none).
 */
const GET_VARY = 'x-api-key, X-Project-Id, Authorization, Accept';

interface Cacheable {
  projectId: string;
  documentId: string | null;
  tag: string;
  /** The headers of a 304 (no content type), and of a 200 per media type. */
  notModified: Headers;
  ok: Partial<Record<Media, Headers>>;
}
const cacheables = new WeakMap<Executed, Cacheable>();

function cacheableOf(r: Executed, body: string, projectId: string, documentId: string | null | undefined): Cacheable {
  const id = documentId ?? null;
  const c = cacheables.get(r);
  // One response-cache entry may be reached by its text with and without an APQ hash: the
  // surrogate keys are those of the request, so another request's are made anew.
  if (c === undefined || c.projectId !== projectId || c.documentId !== id) {
    const tag = c?.tag ?? `"${createHash('sha256').update(body).digest('base64url')}"`;
    const keys = surrogateKeys(projectId, documentId);
    const h = new Headers({
      'cache-control': r.cacheControl,
      vary: GET_VARY,
      etag: tag,
      'surrogate-key': keys.join(' '),
      'cache-tag': keys.join(','),
    });
    const made: Cacheable = { projectId, documentId: id, tag, notModified: h, ok: {} };
    if (c === undefined) cacheables.set(r, made);
    return made;
  }
  return c;
}

/** If-None-Match (weak comparison, RFC 9110 §13.1.2): does any listed tag match? */
function matches(ifNoneMatch: string, tag: string): boolean {
  if (ifNoneMatch === tag) return true;
  if (ifNoneMatch.length > 8_192) return false;
  for (const part of ifNoneMatch.split(',')) {
    const t = part.trim();
    if (t === '*' || t === tag || (t.startsWith('W/') && t.slice(2) === tag)) return true;
  }
  return false;
}

export function surrogateKeys(projectId: string, documentId: string | null | undefined): string[] {
  return documentId ? [projectSurrogateKey(projectId), `svc-d-${documentId}`] : [projectSurrogateKey(projectId)];
}

export function cachedGet(
  request: Request,
  r: Executed,
  body: string,
  rate: RateHeaders,
  media: Media,
  projectId: string,
  documentId: string | null | undefined,
): Response {
  const c = cacheableOf(r, body, projectId, documentId);
  const inm = request.headers.get('if-none-match');
  let res: Response;
  if (inm !== null && matches(inm, c.tag)) res = new Response(null, { status: 304, headers: c.notModified });
  else {
    let h = c.ok[media];
    if (h === undefined) {
      h = new Headers(c.notModified);
      h.set('content-type', CONTENT_TYPE[media]);
      c.ok[media] = h;
    }
    res = new Response(body, { status: 200, headers: h });
  }
  const h = res.headers;
  h.set('x-ratelimit-limit', String(rate.limit));
  h.set('x-ratelimit-remaining', String(rate.remaining));
  h.set('x-ratelimit-reset', String(rate.reset));
  return res;
}
