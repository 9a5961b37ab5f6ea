import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { authenticateControl } from '../control/credentials.ts';
import { addMember, createProject, createTenant } from '../control/tenancy.ts';
import { BadUserInput } from '../errors.ts';

/** Control-plane endpoints used by the CLI (docs/control-plane.md). */
export function controlRoutes(svc: Service) {
  const caller = (headers: Record<string, string | undefined>) =>
    authenticateControl(svc.sql, svc.rootTokenHash, headers.authorization);
  const body = (b: unknown): Record<string, unknown> => {
    if (b === undefined || b === null || b === '') return {};
    if (typeof b !== 'object' || Array.isArray(b)) throw new BadUserInput('The request body must be a JSON object');
    return b as Record<string, unknown>;
  };
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
