import { Elysia } from 'elysia';
import { controlCaller, objectBody } from './control-request.ts';
import type { Service } from '../service.ts';
import { addMember, createProject, createTenant } from '../control/tenancy.ts';
import { createInvite } from '../control/member-sessions.ts';

/** Control-plane endpoints used by the CLI (docs/control-plane.md). */
export function controlRoutes(svc: Service) {
  const caller = (headers: Record<string, string | undefined>) => controlCaller(svc, headers);
  const body = objectBody;
  return new Elysia({ prefix: '/v1/control' })
    .get('/whoami', async ({ headers }) => caller(headers))
    .post('/tenants', async ({ headers, body: b, set }) => {
      const result = await createTenant(svc.sql, await caller(headers), body(b));
      set.status = 201;
      set.headers['cache-control'] = 'no-store';
      // CONTRACT §3 fixes this answer's fields: the owner signs in to the Studio with a
      // one-time code sent to --owner-email (docs/studio.md).
      return result;
    })
    .post('/projects', async ({ headers, body: b, set }) => {
      const result = await createProject(svc.sql, await caller(headers), body(b));
      set.status = 201;
      return result;
    })
    .post('/members', async ({ headers, body: b, set }) => {
      const who = await caller(headers);
      const input = body(b);
      const result = await addMember(svc.sql, who, input);
      set.status = 201;
      set.headers['cache-control'] = 'no-store';
      if (!svc.settings.studio || who.kind !== 'member') return result;
      // The member's first sign-in to the Studio: a single-use link to choose a password.
      const token = await createInvite(svc.sql, who.tenantId, String(input.email).trim());
      return { ...result, loginUrl: `${svc.settings.baseUrl}/studio/welcome#token=${token}` };
    });
}
