import type { Server } from 'bun';
import { Elysia } from 'elysia';
import type { Gate } from '../auth/gate.ts';
import type { RateDecision } from '../auth/rate-limit.ts';
import { toSvcError } from '../errors.ts';
import { execute, executeNow, schemaSdl, type ExecuteOptions, type GraphqlRequest } from '../graphql/execute.ts';
import { lsnHeaders, presentedLsn } from './replica-lsn.ts';
import type { GraphqlDeps } from '../graphql/context.ts';
import { maskError } from '../graphql/errors.ts';
import { GRAPHIQL_HTML } from '../graphql/graphiql.ts';
import { auditFrom, type AuditFrom } from '../editorial/audit.ts';
import type { RequestLog } from '../metrics/requests.ts';
import { bodyLimitFor, limitBody } from './body.ts';
import { checkPost, decodePost, readGet } from './graphql-decode.ts';
import { bodyOf, cachedGet, failure, json, negotiate, statusOf, VARY } from './graphql-answer.ts';

/**
 * GraphQL over HTTP (spec "GraphQL over HTTP", CONTRACT §6): POST and GET /graphql, GET /schema
 * and GET /graphiql. Thin: the gate authenticates and counts, graphql-decode.ts decodes the
 * request, the core (src/graphql/execute.ts) answers, graphql-answer.ts masks its errors once and
 * serialises its answer.
 */
export type GraphqlHandler = (
  request: Request,
  method: 'GET' | 'POST',
  clientIp: (() => string | null) | null,
  /** Told of the answer before it is returned (the direct route counts and logs with it). */
  answered?: (request: Request, response: Response) => void,
) => Promise<Response>;

/**
 * One GraphQL request over HTTP. A read whose answer is in memory (key, document and response
 * cached) waits for nothing but its body: the gate, the charge and the core answer without a
 * promise when they can (authenticateNow, chargeNow, executeNow).
 */
export function graphqlHandler(
  deps: GraphqlDeps & { gate: Pick<Gate, 'authenticateNow' | 'allowNow'> },
): GraphqlHandler {
  const { gate } = deps;
  const production = deps.settings.production;
  return async (request, method, clientIp, answered) => {
    const done = (res: Response) => {
      answered?.(request, res);
      return res;
    };
    let rate: RateDecision | null = null;
    const headers = request.headers;
    const media = negotiate(headers.get('accept'));
    try {
      const a = gate.authenticateNow({ headers, request });
      const caller = a instanceof Promise ? await a : a;
      let req: GraphqlRequest | GraphqlRequest[];
      if (method === 'POST') {
        checkPost(headers);
        req = decodePost(await request.text());
      } else req = readGet(request);
      const batch = Array.isArray(req) ? req : null;
      // Every operation of a batch counts against the key's limit.
      const allowed = gate.allowNow(caller.key, batch ? batch.length : 1);
      rate = allowed instanceof Promise ? await allowed : allowed;
      // A customer token makes the read per customer: never shared, never in the response cache.
      // The audit log's view of the request, made once, only if the request writes.
      let from: AuditFrom | undefined;
      // A write's response names its commit's position (`opts.wrote`, read replicas: http/replica-lsn.ts).
      const opts: ExecuteOptions = {
        method,
        customer: caller.customer,
        clientIp,
        auditFrom: () => (from ??= auditFrom(headers, clientIp?.() ?? null)),
        lsn: presentedLsn(headers, deps.replicas),
      };
      if (!batch) {
        const one = req as GraphqlRequest;
        const x = executeNow(deps, caller.key, one, opts);
        const r = x instanceof Promise ? await x : x;
        const body = bodyOf(r, production);
        const status = statusOf(r, media);
        if (method === 'GET' && status === 200 && r.cacheControl.startsWith('public'))
          return done(cachedGet(request, r, body, rate, media, caller.key.projectId, one.documentId));
        return done(json(status, body, opts.wrote ? lsnHeaders(deps.replicas) : null, media, r.cacheControl, rate));
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
      return done(
        json(
          200,
          `[${results.map((r) => r.body).join(',')}]`,
          opts.wrote ? lsnHeaders(deps.replicas) : null,
          media,
          cacheControl,
          rate,
        ),
      );
    } catch (err) {
      return done(failure(err, production, media, rate));
    }
  };
}

/**
 * POST and GET /graphql straight from Bun.serve's router, outside Elysia (src/http/api.ts
 * installs them over Elysia's own routes for the path): what the API listener's global hooks do
 * for every other route is done here — the request is timed from its start, counted and logged
 * (RequestLog), and a body without a Content-Length within the limit is read through the
 * counting stream of http/body.ts. Elysia's context, hooks and response mapping were ~X µs of a
 * cached read's ~45 µs of server CPU (bench/NOTES.md, issue 31). The Elysia routes stay for
 * `app.handle()` and answer the same through the same handler.
 */
export function directGraphqlRoutes(deps: GraphqlDeps & { gate: Gate; requests: RequestLog }) {
  const handle = graphqlHandler(deps);
  const { requests } = deps;
  const meter = requests.meter('graphql', '/graphql');
  const limit = bodyLimitFor('/graphql');
  const answeredPost = (request: Request, res: Response) => meter.done(request, 'POST', '/graphql', res.status);
  const answeredGet = (request: Request, res: Response) => meter.done(request, 'GET', '/graphql', res.status);
  const post = (request: Request, server: Server<unknown>) => {
    requests.start(request);
    const limited = limitBody(request, limit);
    if (limited !== request) requests.carry(request, limited);
    return handle(limited, 'POST', () => server.requestIP(request)?.address ?? null, answeredPost);
  };
  const get = (request: Request) => {
    requests.start(request);
    return handle(request, 'GET', null, answeredGet);
  };
  return { '/graphql': { POST: post, GET: get } };
}

/** `graphiql: false` leaves /graphiql to the Studio, which serves the real GraphiQL (src/http/studio.ts). */
export function graphqlRoutes(deps: GraphqlDeps & { gate: Gate }, opts: { graphiql: boolean } = { graphiql: true }) {
  const { gate } = deps;
  const production = deps.settings.production;
  const handle = graphqlHandler(deps);
  const app = new Elysia({ name: 'svc.graphql' })
    .post(
      '/graphql',
      ({ request, server }) => handle(request, 'POST', () => server?.requestIP(request)?.address ?? null),
      { parse: 'none' },
    )
    .get('/graphql', ({ request }) => handle(request, 'GET', null))
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
