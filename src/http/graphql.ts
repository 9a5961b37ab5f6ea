import { Elysia } from 'elysia';
import type { Gate } from '../auth/gate.ts';
import { BadUserInput, PayloadTooLarge, toSvcError } from '../errors.ts';
import { execute, schemaSdl, startsAsMutation, type GraphqlRequest } from '../graphql/execute.ts';
import { lsnHeaders, presentedLsn } from './replica-lsn.ts';
import type { Executed } from '../graphql/response-cache.ts';
import type { GraphqlDeps } from '../graphql/context.ts';
import { LIMITS } from '../graphql/limits.ts';
import { Lru } from '../graphql/lru.ts';
import { maskError, maskErrors } from '../graphql/errors.ts';
import { GRAPHIQL_HTML } from '../graphql/graphiql.ts';

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

const CONTENT_TYPE = { 'graphql-response': `${GRAPHQL_RESPONSE}; charset=utf-8`, json: 'application/json; charset=utf-8', legacy: 'application/json; charset=utf-8' } as const;

/**
 * An answer: its content type, `headers`, then (for executed operations) `cache-control` and, for
 * a shareable answer, `vary`. Set one by one on the new Response: the two merged objects this
 * built for the constructor cost ~0.3 µs a request more (0.89 against 0.57 µs, Bun 1.4, this box;
 * docs/decisions.md, "Writes, session 5: service CPU per mutation").
 */
function json(status: number, body: string, headers: Record<string, string>, media: Media = 'legacy', cacheControl?: string): Response {
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
  if (media === 'graphql-response') return r.rejected || (r.body === undefined && r.result.data === undefined) ? 400 : 200;
  return r.rejected ? 400 : 200;
}

/** Failures before execution still answer in GraphQL's shape, with the error's HTTP status. */
function failure(err: unknown, production: boolean, extra: Record<string, string> = {}, media: Media = 'legacy'): Response {
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
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new BadUserInput('"variables" must be a JSON object');
  return v as Record<string, unknown>;
}

function toRequest(body: unknown): GraphqlRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadUserInput('The request body must be a JSON object with "query"');
  const b = body as Record<string, unknown>;
  if (typeof b.query !== 'string') throw new BadUserInput('The request body needs a "query" string');
  if (b.operationName !== undefined && b.operationName !== null && typeof b.operationName !== 'string') throw new BadUserInput('"operationName" must be a string');
  if (b.extensions !== undefined && b.extensions !== null && (typeof b.extensions !== 'object' || Array.isArray(b.extensions))) throw new BadUserInput('"extensions" must be a JSON object');
  return { query: b.query, variables: parseVariables(b.variables), operationName: (b.operationName as string | undefined) ?? null };
}

/** One operation, or a batch: a JSON array of operations answered by an array of results. */
async function readPost(request: Request): Promise<GraphqlRequest | GraphqlRequest[]> {
  // GraphQL over HTTP: a POST says what its body is. Only JSON is read (a form or text/plain
  // post, which a browser sends cross-site without asking, is refused unread).
  const type = request.headers.get('content-type')?.split(';')[0]!.trim().toLowerCase();
  if (!type) throw new BadUserInput('POST /graphql needs a Content-Type: application/json header');
  if (type !== 'application/json') throw new BadUserInput(`POST /graphql takes application/json, not ${type.slice(0, 100)}`);
  const length = Number(request.headers.get('content-length') ?? 0);
  if (length > LIMITS.maxBodyBytes) throw new PayloadTooLarge(`The request body exceeds ${LIMITS.maxBodyBytes} bytes`);
  const text = await request.text();
  if (text.length > LIMITS.maxBodyBytes) throw new PayloadTooLarge(`The request body exceeds ${LIMITS.maxBodyBytes} bytes`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BadUserInput('The request body is not valid JSON');
  }
  if (!Array.isArray(body)) return toRequest(body);
  if (body.length === 0 || body.length > LIMITS.maxHttpBatch) throw new BadUserInput(`A batch holds 1 to ${LIMITS.maxHttpBatch} operations`);
  return body.map(toRequest);
}

function readGet(request: Request): GraphqlRequest {
  const url = new URL(request.url);
  const query = url.searchParams.get('query');
  if (!query) throw new BadUserInput('GET /graphql needs a "query" URL parameter');
  return { query, variables: parseVariables(url.searchParams.get('variables')), operationName: url.searchParams.get('operationName') };
}

/** `graphiql: false` leaves /graphiql to the Studio, which serves the real GraphiQL (src/http/studio.ts). */
export function graphqlRoutes(deps: GraphqlDeps & { gate: Gate }, opts: { graphiql: boolean } = { graphiql: true }) {
  const { gate } = deps;
  const production = deps.settings.production;

  const handle = async (request: Request, method: 'GET' | 'POST', clientIp: (() => string | null) | null = null): Promise<Response> => {
    let rate: Record<string, string> = {};
    const media = negotiate(request.headers.get('accept'));
    try {
      const caller = await gate.authenticate({ headers: request.headers, request });
      const req = method === 'POST' ? await readPost(request) : readGet(request);
      const batch = Array.isArray(req) ? req : null;
      // Every operation of a batch counts against the key's limit.
      rate = await gate.charge(caller.key, batch ? batch.length : 1);
      // A customer token makes the read per customer: never shared, never in the response cache.
      const opts = { method, customer: caller.customer, clientIp, lsn: presentedLsn(request.headers, deps.replicas) };
      // A write's response names its commit's position (read replicas, http/replica-lsn.ts).
      const wrote = deps.replicas && (batch ?? [req as GraphqlRequest]).some((one) => startsAsMutation(one.query));
      if (!batch) {
        const r = await execute(deps, caller.key, req as GraphqlRequest, opts);
        return json(statusOf(r, media), bodyOf(r, production), wrote ? { ...rate, ...lsnHeaders(deps.replicas) } : rate, media, r.cacheControl);
      }
      const results: { body: string; cacheControl: string }[] = [];
      for (const one of batch) {
        results.push(
          await execute(deps, caller.key, one, opts).then(
            (r) => ({ body: bodyOf(r, production), cacheControl: r.cacheControl }),
            (err) => ({ body: JSON.stringify({ errors: [maskError(toSvcError(err), production)] }), cacheControl: 'no-store' }),
          ),
        );
      }
      // The batch is only as cacheable as its least cacheable answer.
      const cacheControl = results.every((r) => r.cacheControl.startsWith('public')) ? results[0]!.cacheControl : results.find((r) => !r.cacheControl.startsWith('public'))!.cacheControl;
      return json(200, `[${results.map((r) => r.body).join(',')}]`, wrote ? { ...rate, ...lsnHeaders(deps.replicas) } : rate, media, cacheControl);
    } catch (err) {
      return failure(err, production, rate, media);
    }
  };

  const app = new Elysia({ name: 'svc.graphql' })
    .post('/graphql', ({ request, server }) => handle(request, 'POST', () => server?.requestIP(request)?.address ?? null), { parse: 'none' })
    .get('/graphql', ({ request }) => handle(request, 'GET'))
    .get('/schema', async ({ request }) => {
      try {
        const caller = await gate.authenticate({ headers: request.headers, request });
        const sdl = await schemaSdl(deps, caller.key);
        return new Response(sdl, { headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'private, no-cache', vary: VARY } });
      } catch (err) {
        return failure(err, production);
      }
    });
  if (!production && opts.graphiql) {
    app.get('/graphiql', () => new Response(GRAPHIQL_HTML, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' } }));
  }
  return app;
}
