import { Elysia } from 'elysia';
import { controlCaller, objectBody } from './control-request.ts';
import type { Service } from '../service.ts';
import { addMember, createProject, createTenant } from '../control/tenancy.ts';

/** Control-plane endpoints used by the CLI (docs/control-plane.md). */
export function controlRoutes(svc: Service) {
  const caller = (headers: Record<string, string | undefined>) => controlCaller(svc, headers);
  const body = objectBody;
  return new Elysia({ prefix: '/v1/control' })
    .get('/whoami', async ({ headers }) => caller(headers))
    .post('/tenants', async ({ headers, body: b, set }) => {
      const result = await createTenant(svc.sql, await caller(headers), body(b));
      set.status = 201;
      return result;
    })
    .post('/projects', async ({ headers, body: b, set }) => {
      const result = await createProject(svc.sql, await caller(headers), body(b));
      set.status = 201;
      return result;
    })
    .post('/members', async ({ headers, body: b, set }) => {
      const result = await addMember(svc.sql, await caller(headers), body(b));
      set.status = 201;
      return result;
    });
}
