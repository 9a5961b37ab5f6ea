import { createHash } from 'node:crypto';
import { Elysia } from 'elysia';
import type { Gate } from '../auth/gate.ts';
import { BadUserInput, PayloadTooLarge, toSvcError } from '../errors.ts';
import { execute, schemaSdl, type ExecuteOptions, type GraphqlRequest } from '../graphql/execute.ts';
import { lsnHeaders, presentedLsn } from './replica-lsn.ts';
import type { Executed } from '../graphql/response-cache.ts';
import type { GraphqlDeps } from '../graphql/context.ts';
import { LIMITS } from '../graphql/limits.ts';
import { Lru } from '../graphql/lru.ts';
import { maskError, maskErrors } from '../graphql/errors.ts';
import { GRAPHIQL_HTML } from '../graphql/graphiql.ts';
import { projectSurrogateKey } from '../graphql/cdn-purge.ts';
import { auditFrom, type AuditFrom } from '../editorial/audit.ts';

/**
 * GraphQL over HTTP (spec "GraphQL over HTTP", CONTRACT §6): POST and GET /graphql, GET /schema
 * and GET /graphiql. Thin: the gate authenticates and counts, this decodes the request, hands it
 * to the core (src/graphql/execute.ts), masks its errors once and serialises its answer.
 */
const VARY = 'x-api-key, X-Project-Id';

/**
 * The media type of the answer, from the request's Accept header (GraphQL over HTTP,
 * "Accept"): `graphql-response` when the client prefers application/graphql-response+json (a
 * request error, an answer without `data`, is then a 400); `json` when it asks for
 * application/json (every well-formed request is then a 200, errors in the body); `legacy`
 * without an Accept header or with only wildcards: application/json, 400 for documents refused
 * before execution (what this service always answered; docs/graphql.md).
 */
type Media = 'graphql-response' | 'json' | 'legacy';
const GRAPHQL_RESPONSE = 'application/graphql-response+json';

/**
 * Answers per Accept value: clients send the same one or two values on every request, and the
 * parse (split, trim, a map and a find per part) cost ~1.5 µs of a mutation's samples. Values up
 * to 256 characters, 64 of them.
 */
const negotiated = new Lru<string, Media>(64);

export function negotiate(accept: string | null): Media {
  if (!accept) return 'legacy';
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
 * An answer: its content type, `headers`, then (for executed operations) `cache-control` and, for
 * a shareable answer, `vary`. Set one by one on the new Response: the two merged objects this
 * built for the constructor cost ~0.3 µs a request more (0.89 against 0.57 µs, Bun 1.4, this box;
 * docs/decisions.md, "Writes, session 5: service CPU per mutation").
 */
function json(
  status: number,
  body: string,
  headers: Record<string, string>,
  media: Media = 'legacy',
  cacheControl?: string,
): Response {
  const res = new Response(body, { status });
  const h = res.headers;
  h.set('content-type', CONTENT_TYPE[media]);
  for (const name in headers) h.set(name, headers[name]!);
  if (cacheControl !== undefined) {
    h.set('cache-control', cacheControl);
    if (cacheControl.startsWith('public')) h.set('vary', VARY);
  }
  return res;
}

/** The status of one executed (or refused) operation under the negotiated media type. */
function statusOf(r: Executed, media: Media): number {
  if (media === 'json') return 200;
  if (media === 'graphql-response')
    return r.rejected || (r.body === undefined && r.result.data === undefined) ? 400 : 200;
  return r.rejected ? 400 : 200;
}

/** Failures before execution still answer in GraphQL's shape, with the error's HTTP status. */
function failure(
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
function bodyOf(x: Executed, production: boolean): string {
  if (x.body !== undefined) return x.body;
  const { data, errors } = x.result;
  if (!errors?.length) return JSON.stringify(x.result);
  const masked = maskErrors(errors, production);
  return JSON.stringify(data === undefined ? { errors: masked } : { errors: masked, data });
}

function parseVariables(raw: unknown): Record<string, unknown> | null {
  if (raw === undefined || raw === null || raw === '') return null;
  let v = raw;
  if (typeof raw === 'string') {
    try {
      v = JSON.parse(raw);
    } catch {
      throw new BadUserInput('"variables" must be a JSON object');
    }
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new BadUserInput('"variables" must be a JSON object');
  return v as Record<string, unknown>;
}

const DOCUMENT_ID = /^sha256:([0-9a-fA-F]{64})$/;
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

/**
 * The document a request names instead of (or beside) its text: `documentId: "sha256:<hex>"`,
 * or Apollo's `extensions.persistedQuery { version: 1, sha256Hash }` (docs/documents.md).
 */
function namedDocument(documentId: unknown, extensions: unknown): { documentId: string | null; persisted: boolean } {
  let id: string | null = null;
  if (documentId !== undefined && documentId !== null) {
    const m = typeof documentId === 'string' ? DOCUMENT_ID.exec(documentId) : null;
    if (!m)
      throw new BadUserInput(
        '"documentId" must be "sha256:" followed by the document\'s SHA-256 in hex (64 characters)',
      );
    id = m[1]!.toLowerCase();
  }
  if (extensions === undefined || extensions === null) return { documentId: id, persisted: false };
  if (typeof extensions !== 'object' || Array.isArray(extensions))
    throw new BadUserInput('"extensions" must be a JSON object');
  const pq = (extensions as Record<string, unknown>).persistedQuery;
  if (pq === undefined || pq === null) return { documentId: id, persisted: false };
  if (typeof pq !== 'object' || Array.isArray(pq))
    throw new BadUserInput('"extensions.persistedQuery" must be an object { version: 1, sha256Hash }');
  const { version, sha256Hash } = pq as Record<string, unknown>;
  if (version !== 1) throw new BadUserInput('Unsupported persisted query version: only version 1 is served');
  if (typeof sha256Hash !== 'string' || !SHA256_HEX.test(sha256Hash))
    throw new BadUserInput('"extensions.persistedQuery.sha256Hash" must be a SHA-256 in hex (64 characters)');
  const hash = sha256Hash.toLowerCase();
  if (id !== null && id !== hash)
    throw new BadUserInput('"documentId" and "extensions.persistedQuery.sha256Hash" name different documents');
  return { documentId: hash, persisted: true };
}

function toRequest(body: unknown): GraphqlRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadUserInput('The request body must be a JSON object with "query"');
  const b = body as Record<string, unknown>;
  const named = namedDocument(b.documentId, b.extensions);
  if (b.query !== undefined && b.query !== null && typeof b.query !== 'string')
    throw new BadUserInput('"query" must be a string');
  if (typeof b.query !== 'string' && named.documentId === null)
    throw new BadUserInput('The request body needs a "query" string or a "documentId"');
  if (b.operationName !== undefined && b.operationName !== null && typeof b.operationName !== 'string')
    throw new BadUserInput('"operationName" must be a string');
  return {
    query: (b.query as string | undefined) ?? '',
    variables: parseVariables(b.variables),
    operationName: (b.operationName as string | undefined) ?? null,
    ...named,
  };
}

/** One operation, or a batch: a JSON array of operations answered by an array of results. */
async function readPost(request: Request): Promise<GraphqlRequest | GraphqlRequest[]> {
  // GraphQL over HTTP: a POST says what its body is. Only JSON is read (a form or text/plain
  // post, which a browser sends cross-site without asking, is refused unread).
  const type = request.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
  if (!type) throw new BadUserInput('POST /graphql needs a Content-Type: application/json header');
  if (type !== 'application/json')
    throw new BadUserInput(`POST /graphql takes application/json, not ${type.slice(0, 100)}`);
  const length = Number(request.headers.get('content-length') ?? 0);
  if (length > LIMITS.maxBodyBytes) throw new PayloadTooLarge(`The request body exceeds ${LIMITS.maxBodyBytes} bytes`);
  const text = await request.text();
  if (text.length > LIMITS.maxBodyBytes)
    throw new PayloadTooLarge(`The request body exceeds ${LIMITS.maxBodyBytes} bytes`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BadUserInput('The request body is not valid JSON');
  }
  if (!Array.isArray(body)) return toRequest(body);
  if (body.length === 0 || body.length > LIMITS.maxHttpBatch)
    throw new BadUserInput(`A batch holds 1 to ${LIMITS.maxHttpBatch} operations`);
  return body.map(toRequest);
}

function readGet(request: Request): GraphqlRequest {
  const url = new URL(request.url);
  if (url.search.length > LIMITS.maxBodyBytes)
    throw new PayloadTooLarge(`The query string exceeds ${LIMITS.maxBodyBytes} characters`);
  const p = url.searchParams;
  let extensions: unknown = null;
  const ext = p.get('extensions');
  if (ext) {
    try {
      extensions = JSON.parse(ext);
    } catch {
      throw new BadUserInput('"extensions" must be a JSON object');
    }
  }
  const named = namedDocument(p.get('documentId'), extensions);
  const query = p.get('query') ?? '';
  if (!query && named.documentId === null)
    throw new BadUserInput('GET /graphql needs a "query" or "documentId" URL parameter');
  return { query, variables: parseVariables(p.get('variables')), operationName: p.get('operationName'), ...named };
}

/**
 * HTTP caching of a shareable GET answer (docs/graphql.md, "HTTP caching"): a strong ETag (the
 * body's SHA-256; remembered for response-cache entries, which are reused), surrogate keys a CDN
 * can purge by (the project, and the trusted document), and `Vary` on every request header the
 * answer depends on (key, project, a customer token, the negotiated media type).
 */
const GET_VARY = 'x-api-key, X-Project-Id, Authorization, Accept';
const etags = new WeakMap<Executed, string>();

function etagOf(r: Executed, body: string): string {
  let tag = etags.get(r);
  if (tag === undefined) {
    tag = `"${createHash('sha256').update(body).digest('base64url')}"`;
    etags.set(r, tag);
  }
  return tag;
}

/** If-None-Match (weak comparison, RFC 9110 §13.1.2): does any listed tag match? */
function matches(ifNoneMatch: string, tag: string): boolean {
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

function cachedGet(
  request: Request,
  r: Executed,
  body: string,
  rate: Record<string, string>,
  media: Media,
  projectId: string,
  documentId: string | null | undefined,
): Response {
  const tag = etagOf(r, body);
  const keys = surrogateKeys(projectId, documentId);
  const inm = request.headers.get('if-none-match');
  const res =
    inm !== null && matches(inm, tag) ? new Response(null, { status: 304 }) : new Response(body, { status: 200 });
  const h = res.headers;
  if (res.status === 200) h.set('content-type', CONTENT_TYPE[media]);
  for (const name in rate) h.set(name, rate[name]!);
  h.set('cache-control', r.cacheControl);
  h.set('vary', GET_VARY);
  h.set('etag', tag);
  h.set('surrogate-key', keys.join(' '));
  h.set('cache-tag', keys.join(','));
  return res;
}

/** `graphiql: false` leaves /graphiql to the Studio, which serves the real GraphiQL (src/http/studio.ts). */
export function graphqlRoutes(deps: GraphqlDeps & { gate: Gate }, opts: { graphiql: boolean } = { graphiql: true }) {
  const { gate } = deps;
  const production = deps.settings.production;

  const handle = async (
    request: Request,
    method: 'GET' | 'POST',
    clientIp: (() => string | null) | null = null,
  ): Promise<Response> => {
    let rate: Record<string, string> = {};
    const media = negotiate(request.headers.get('accept'));
    try {
      const caller = await gate.authenticate({ headers: request.headers, request });
      const req = method === 'POST' ? await readPost(request) : readGet(request);
      const batch = Array.isArray(req) ? req : null;
      // Every operation of a batch counts against the key's limit.
      rate = await gate.charge(caller.key, batch ? batch.length : 1);
      // A customer token makes the read per customer: never shared, never in the response cache.
      // The audit log's view of the request, made once, only if the request writes.
      let from: AuditFrom | undefined;
      // A write's response names its commit's position (`opts.wrote`, read replicas: http/replica-lsn.ts).
      const opts: ExecuteOptions = {
        method,
        customer: caller.customer,
        clientIp,
        auditFrom: () => (from ??= auditFrom(request.headers, clientIp?.() ?? null)),
        lsn: presentedLsn(request.headers, deps.replicas),
      };
      if (!batch) {
        const one = req as GraphqlRequest;
        const r = await execute(deps, caller.key, one, opts);
        const body = bodyOf(r, production);
        const status = statusOf(r, media);
        if (method === 'GET' && status === 200 && r.cacheControl.startsWith('public'))
          return cachedGet(request, r, body, rate, media, caller.key.projectId, one.documentId);
        return json(status, body, opts.wrote ? { ...rate, ...lsnHeaders(deps.replicas) } : rate, media, r.cacheControl);
      }
      const results: { body: string; cacheControl: string }[] = [];
      for (const one of batch) {
        results.push(
          await execute(deps, caller.key, one, opts).then(
            (r) => ({ body: bodyOf(r, production), cacheControl: r.cacheControl }),
            (err) => ({
              body: JSON.stringify({ errors: [maskError(toSvcError(err), production)] }),
              cacheControl: 'no-store',
            }),
          ),
        );
      }
      // The batch is only as cacheable as its least cacheable answer.
      const cacheControl = results.every((r) => r.cacheControl.startsWith('public'))
        ? results[0]!.cacheControl
        : results.find((r) => !r.cacheControl.startsWith('public'))!.cacheControl;
      return json(
        200,
        `[${results.map((r) => r.body).join(',')}]`,
        opts.wrote ? { ...rate, ...lsnHeaders(deps.replicas) } : rate,
        media,
        cacheControl,
      );
    } catch (err) {
      return failure(err, production, rate, media);
    }
  };

  const app = new Elysia({ name: 'svc.graphql' })
    .post(
      '/graphql',
      ({ request, server }) => handle(request, 'POST', () => server?.requestIP(request)?.address ?? null),
      { parse: 'none' },
    )
    .get('/graphql', ({ request }) => handle(request, 'GET'))
    .get('/schema', async ({ request }) => {
      try {
        const caller = await gate.authenticate({ headers: request.headers, request });
        const sdl = await schemaSdl(deps, caller.key);
        return new Response(sdl, {
          headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'private, no-cache', vary: VARY },
        });
      } catch (err) {
        return failure(err, production);
      }
    });
  if (!production && opts.graphiql) {
    app.get(
      '/graphiql',
      () =>
        new Response(GRAPHIQL_HTML, {
          headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' },
        }),
    );
  }
  return app;
}
