import { Elysia } from 'elysia';
import { controlCaller, objectBody } from './control-request.ts';
import type { Service } from '../service.ts';
import { controlCreateKey, controlDeleteKey, controlListKeys, controlUpdateKey } from '../control/member-api-keys.ts';

/**
 * API-key endpoints: management under `/v1/control/api-keys` (control keys), and
 * `GET /v1/whoami`, the smallest request made with an API key: it reports what the key is
 * and counts against its rate limit like any other request (docs/keys.md).
 */
export function keyRoutes(svc: Service) {
  const caller = (headers: Record<string, string | undefined>) => controlCaller(svc, headers);
  const body = objectBody;
  return new Elysia({ name: 'svc.keys' })
    .get('/v1/whoami', async ({ request }) => {
      const { key: principal, headers } = await svc.gate.admit({ headers: request.headers, request });
      const out = {
        keyId: principal.keyId,
        kind: principal.kind,
        tenantId: principal.tenantId,
        projectId: principal.projectId,
        scopes: [...principal.scopes].sort(),
        allowedModels: principal.allowedModels,
      };
      return new Response(JSON.stringify(out), {
        headers: { ...headers, 'content-type': 'application/json', 'cache-control': 'private, no-store' },
      });
    })
    .group('/v1/control/api-keys', (app) =>
      app
        .post('/', async ({ headers, body: b, set }) => {
          const out = await controlCreateKey(svc.sql, svc.bus, await caller(headers), body(b));
          set.status = 201;
          set.headers['cache-control'] = 'no-store';
          return out;
        })
        .get('/', async ({ headers, query }) => controlListKeys(svc.sql, await caller(headers), query.project))
        .patch('/:id', async ({ headers, params, body: b }) =>
          controlUpdateKey(svc.sql, svc.bus, await caller(headers), params.id, body(b)),
        )
        .post('/:id/disable', async ({ headers, params }) =>
          controlUpdateKey(svc.sql, svc.bus, await caller(headers), params.id, { disabled: true }),
        )
        .post('/:id/enable', async ({ headers, params }) =>
          controlUpdateKey(svc.sql, svc.bus, await caller(headers), params.id, { disabled: false }),
        )
        .delete('/:id', async ({ headers, params }) =>
          controlDeleteKey(svc.sql, svc.bus, await caller(headers), params.id),
        ),
    );
}
