import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { authenticateRequest, takeRateLimit } from '../auth/resolve.ts';
import { rateLimitError, rateLimitHeaders } from '../auth/rate-limit.ts';
import { BadUserInput, PayloadTooLarge, toSvcError } from '../errors.ts';
import { executeGraphql, installResponseInvalidation, schemaSdl, type GraphqlRequest } from '../graphql/execute.ts';
import { LIMITS } from '../graphql/limits.ts';
import { maskError } from '../graphql/errors.ts';
import { GRAPHIQL_HTML } from '../graphql/graphiql.ts';

/**
 * GraphQL over HTTP (spec "GraphQL over HTTP", CONTRACT §6): POST and GET /graphql, GET /schema
 * and GET /graphiql. Thin: authenticate, count the rate limit, decode the request, hand it to
 * src/graphql/execute.ts, and turn its answer into headers.
 */
const VARY = 'x-api-key, X-Project-Id';

function json(status: number, body: string, headers: Record<string, string>): Response {
  return new Response(body, { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });
}

/** Failures before execution still answer in GraphQL's shape, with the error's HTTP status. */
function failure(err: unknown, production: boolean, extra: Record<string, string> = {}): Response {
  const e = toSvcError(err);
  const headers: Record<string, string> = { 'cache-control': 'no-store', ...extra };
  if (e.code === 'METHOD_NOT_ALLOWED') headers.allow = 'POST';
  // maskError logs and masks anything that is not an SvcError.
  return json(e.status, JSON.stringify({ errors: [maskError(err as Error, production)] }), headers);
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
  return { query: b.query, variables: parseVariables(b.variables), operationName: (b.operationName as string | undefined) ?? null };
}

/** One operation, or a batch: a JSON array of operations answered by an array of results. */
async function readPost(request: Request): Promise<GraphqlRequest | GraphqlRequest[]> {
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

export function graphqlRoutes(svc: Service) {
  installResponseInvalidation(svc);
  const production = svc.settings.production;

  const handle = async (request: Request, method: 'GET' | 'POST'): Promise<Response> => {
    let rate: Record<string, string> = {};
    try {
      const principal = await authenticateRequest(svc, request.headers);
      const req = method === 'POST' ? await readPost(request) : readGet(request);
      const batch = Array.isArray(req) ? req : null;
      // Every operation of a batch counts against the key's limit.
      const decision = await takeRateLimit(svc, principal, batch ? batch.length : 1);
      rate = rateLimitHeaders(decision);
      if (!decision.allowed) return failure(rateLimitError(decision), production, { ...rate, 'retry-after': String(decision.retryAfter) });
      // A customer token makes the read per customer: never shared, never in the response cache.
      const customer = request.headers.has('authorization');
      if (!batch) {
        const r = await executeGraphql(svc, principal, req as GraphqlRequest, { method, customer });
        return json(r.status, r.body, { ...rate, 'cache-control': r.cacheControl, ...(r.cacheControl.startsWith('public') ? { vary: VARY } : {}) });
      }
      const results = [];
      for (const one of batch) results.push(await executeGraphql(svc, principal, one, { method, customer }).catch((err) => ({ status: 200, body: JSON.stringify({ errors: [maskError(toSvcError(err), production)] }), cacheControl: 'no-store' })));
      // The batch is only as cacheable as its least cacheable answer.
      const cacheControl = results.every((r) => r.cacheControl.startsWith('public')) ? results[0]!.cacheControl : results.find((r) => !r.cacheControl.startsWith('public'))!.cacheControl;
      return json(200, `[${results.map((r) => r.body).join(',')}]`, { ...rate, 'cache-control': cacheControl, ...(cacheControl.startsWith('public') ? { vary: VARY } : {}) });
    } catch (err) {
      return failure(err, production, rate);
    }
  };

  const app = new Elysia({ name: 'svc.graphql' })
    .post('/graphql', ({ request }) => handle(request, 'POST'), { parse: 'none' })
    .get('/graphql', ({ request }) => handle(request, 'GET'))
    .get('/schema', async ({ request }) => {
      try {
        const principal = await authenticateRequest(svc, request.headers);
        const sdl = await schemaSdl(svc, principal);
        return new Response(sdl, { headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'private, no-cache', vary: VARY } });
      } catch (err) {
        return failure(err, production);
      }
    });
  if (!production) {
    app.get('/graphiql', () => new Response(GRAPHIQL_HTML, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache' } }));
  }
  return app;
}
