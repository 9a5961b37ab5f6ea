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
 * The fixed headers of an executed operation's answer, per media type and Cache-Control value:
 * built once and handed to the Response, which copies them; only the request's own headers
 * (rate limit) are set one by one. Six `headers.set` calls were ~1.3 µs a request, a copy of
 * prepared Headers and three sets ~0.7 µs (Bun 1.4, this box; bench/NOTES.md, issue 31). The
 * Cache-Control values are few (per project setting); past 256 the headers are built per request.
 */
const fixedHeaders = new Map<string, Headers>();

function fixed(media: Media, cacheControl: string | undefined): Headers {
  const key = cacheControl === undefined ? media : `${media}\0${cacheControl}`;
  let h = fixedHeaders.get(key);
  if (h === undefined) {
    h = new Headers({ 'content-type': CONTENT_TYPE[media] });
    if (cacheControl !== undefined) {
      h.set('cache-control', cacheControl);
      if (cacheControl.startsWith('public')) h.set('vary', VARY);
    }
    if (fixedHeaders.size < 256) fixedHeaders.set(key, h);
  }
  return h;
}

/**
 * An answer: its content type, then (for executed operations) `cache-control` and, for a
 * shareable answer, `vary`, then `headers` (the request's own: rate limit, errors' extras).
 */
export function json(
  status: number,
  body: string,
  headers: Record<string, string>,
  media: Media = 'legacy',
  cacheControl?: string,
): Response {
  const res = new Response(body, { status, headers: fixed(media, cacheControl) });
  const h = res.headers;
  for (const name in headers) h.set(name, headers[name]!);
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
  extra: Record<string, string> = {},
  media: Media = 'legacy',
): Response {
  const e = toSvcError(err);
  const headers: Record<string, string> = { 'cache-control': 'no-store', ...extra, ...e.headers };
  // maskError logs and masks anything that is not an SvcError.
  return json(e.status, JSON.stringify({ errors: [maskError(err as Error, production)] }), headers, media);
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
  rate: Record<string, string>,
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
  for (const name in rate) h.set(name, rate[name]!);
  return res;
}
