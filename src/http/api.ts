import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { errorBoundary } from './errors.ts';
import { bodyLimitFor, bodyLimits } from './body.ts';
import { fileRoutes, UPLOAD_OVERHEAD, UPLOAD_PATH, UPLOADS_PATH } from './files.ts';
import { controlRoutes } from './control.ts';
import { keyRoutes } from './api-keys.ts';
import { configRoutes } from './config.ts';
import { directGraphqlRoutes, graphqlRoutes } from './graphql.ts';
import { identityRoutes } from './identity.ts';
import { oidcRoutes } from './oidc.ts';
import { operationRoutes } from './operations.ts';
import { graphqlWsRoutes, MAX_WS_FRAME_BYTES } from './graphql-ws.ts';
import type { RealtimeHub } from '../realtime/hub.ts';
import { collabRoutes } from './collab.ts';
import { metricsRoutes } from './metrics.ts';
import { surfaceOf } from '../metrics/requests.ts';
import { recordRoutes } from './records.ts';
import { provisionRoutes } from './provision.ts';
import { studioRoutes } from './studio.ts';
import { billingRoutes } from './billing.ts';
import { designTokenRoutes } from './design-tokens.ts';
import { auditAfterResponse, auditRoutes } from './audit.ts';

/**
 * The API listener: one Elysia app; each capability contributes a plugin. Built apart from
 * `listen` so tests can mount it on an ephemeral port.
 */
export function buildApi(svc: Service, hub?: RealtimeHub) {
  const { requests } = svc;
  // Bun drops a WebSocket frame past maxPayloadLength (close 1009) before buffering it; below
  // that, /graphql/ws refuses frames over the body limit with 4413 (src/http/graphql-ws.ts).
  const app = new Elysia({
    name: 'svc.api',
    websocket: { maxPayloadLength: 2 * MAX_WS_FRAME_BYTES },
    // POST and GET /graphql go from Bun's router straight to their handler, past Elysia's
    // pipeline, and do themselves what the hooks below do (src/http/graphql.ts). Elysia's
    // routes for the path stay, for app.handle().
    serve: { routes: directGraphqlRoutes(svc) },
  })
    // Every request is counted and logged once, whatever answered it (a route, an error, a 404).
    .onRequest(({ request }) => requests.start(request))
    .onAfterResponse({ as: 'global' }, ({ request, route, set, responseValue, headers, params, server }) => {
      // Named one by one: a hook that takes the whole context makes Elysia parse every body.
      auditAfterResponse(svc, { request, route, set, responseValue, headers, params, server } as never);
      const status =
        responseValue instanceof Response ? responseValue.status : typeof set.status === 'number' ? set.status : 200;
      const pattern = route || 'unmatched';
      const path = request.url.slice(request.url.indexOf('/', 8)).split('?', 1)[0]!;
      requests.done(request, {
        method: request.method,
        surface: surfaceOf(pattern),
        route: pattern,
        path,
        status,
        ms: requests.elapsed(request),
      });
    })
    .use(errorBoundary)
    // Uploads get the file limit (plus multipart framing); the upload itself counts the file.
    .use(
      bodyLimits({
        limitFor: (path) =>
          path === UPLOAD_PATH || path.startsWith(UPLOADS_PATH)
            ? svc.settings.filesMaxBytes + UPLOAD_OVERHEAD
            : bodyLimitFor(path),
        replaced: (from, to) => requests.carry(from, to),
      }),
    )
    .get('/health', async () => ({
      status: 'ok',
      bus: await svc.bus.health(),
      // Read replicas (DATABASE_READ_URL): each one's state and lag; all down, reads use the primary.
      ...(svc.replicas ? { replicas: svc.replicas.status() } : {}),
      details: {
        vectorSearch: svc.vectorStore === 'pgvector' ? 'pgvector (HNSW, cosine)' : 'real[] (exact cosine in SQL)',
        vectorSearchReason: svc.vectorStoreReason,
      },
    }))
    .use(metricsRoutes(svc))
    .use(controlRoutes(svc))
    .use(auditRoutes(svc))
    .use(keyRoutes(svc))
    .use(configRoutes(svc))
    .use(recordRoutes(svc))
    .use(provisionRoutes(svc))
    .use(identityRoutes(svc))
    .use(oidcRoutes(svc))
    .use(operationRoutes(svc))
    .use(graphqlRoutes(svc, { graphiql: !svc.settings.studio }))
    .use(collabRoutes(svc))
    .use(fileRoutes(svc))
    .use(billingRoutes(svc))
    .use(designTokenRoutes(svc));
  if (svc.settings.studio) app.use(studioRoutes(svc));
  // /graphql/ws needs the process's realtime hub (src/server.ts passes it).
  return hub ? app.use(graphqlWsRoutes(svc, hub)) : app;
}

export type Api = ReturnType<typeof buildApi>;
