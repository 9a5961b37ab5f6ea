import { Elysia } from 'elysia';
import { controlCaller, objectBody } from './control-request.ts';
import type { Service } from '../service.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { PermissionDenied } from '../errors.ts';
import { pushConfig } from '../config/apply.ts';
import { listDocuments, pushDocuments, removeDocument, revalidateDocuments } from '../graphql/trusted.ts';
import { listDomains, pullConfig } from '../config/read.ts';
import { verifyDomain } from '../identity/domains.ts';
import { pushSecrets } from '../secrets/vault.ts';
import { listCustomers } from '../identity/customer-list.ts';
import {
  assignRole,
  createRole,
  disableRole,
  listAssignments,
  listRoles,
  revokeRole,
  updateRole,
} from '../identity/customer-roles.ts';

/** Configuration as code on the control plane (docs/config.md). */
export function configRoutes(svc: Service) {
  const caller = (headers: Record<string, string | undefined>) => controlCaller(svc, headers);
  const body = objectBody;
  const documents = {
    push: (projectId: string, manifest: unknown, replace: boolean) => pushDocuments(svc, projectId, manifest, replace),
    revalidate: (projectId: string) => revalidateDocuments(svc, projectId),
  };
  /** Resolves the project and checks the caller's permission on it. */
  const project = async (c: ControlCaller, id: string, perm: 'config:read' | 'config:push') => {
    const p = await projectOfCaller(svc.sql, c, id);
    if (!memberMay(c, perm, p.id))
      throw new PermissionDenied(
        perm === 'config:read' ? 'This role may not read this project' : 'This role may not change this project',
      );
    return p.id;
  };
  return (
    new Elysia({ prefix: '/v1/control/projects/:id' })
      .post('/config', async ({ headers, params, body: b }) => {
        const input = body(b);
        return pushConfig({ ...svc, documents }, await caller(headers), params.id, input.config, {
          force: input.force === true,
          atomic: input.atomic === true,
        });
      })
      // Trusted documents (docs/documents.md): `svc documents push|list|rm`, the Studio's explorer.
      .post('/documents', async ({ headers, params, body: b }) => {
        const input = body(b);
        return pushDocuments(
          svc,
          await project(await caller(headers), params.id, 'config:push'),
          input.documents,
          input.replace === true,
        );
      })
      .get('/documents', async ({ headers, params }) =>
        listDocuments(svc, await project(await caller(headers), params.id, 'config:read')),
      )
      .delete('/documents/:hash', async ({ headers, params }) =>
        removeDocument(svc, await project(await caller(headers), params.id, 'config:push'), params.hash),
      )
      .get('/config', async ({ headers, params }) => pullConfig(svc.sql, await caller(headers), params.id))
      .get('/domains', async ({ headers, params }) => ({
        domains: await listDomains(svc.sql, await project(await caller(headers), params.id, 'config:read')),
      }))
      .post('/domains/verify', async ({ headers, params, body: b }) =>
        verifyDomain(svc.sql, await caller(headers), params.id, body(b).domain),
      )
      .post('/secrets', async ({ headers, params, body: b }) =>
        pushSecrets(svc, await caller(headers), params.id, body(b)),
      )
      .get('/customers', async ({ headers, params, query }) => ({
        customers: await listCustomers(svc.sql, await project(await caller(headers), params.id, 'config:read'), {
          q: query.q,
          limit: query.limit,
        }),
      }))
      .get('/customer-roles', async ({ headers, params }) => ({
        roles: await listRoles(svc.sql, await project(await caller(headers), params.id, 'config:read')),
      }))
      .post('/customer-roles', async ({ headers, params, body: b, set }) => {
        const role = await createRole(svc.sql, await project(await caller(headers), params.id, 'config:push'), body(b));
        set.status = 201;
        return role;
      })
      .patch('/customer-roles/:key', async ({ headers, params, body: b }) =>
        updateRole(svc.sql, await project(await caller(headers), params.id, 'config:push'), params.key, body(b)),
      )
      .post('/customer-roles/:key/disable', async ({ headers, params }) =>
        disableRole(svc.sql, await project(await caller(headers), params.id, 'config:push'), params.key),
      )
      .post('/customer-roles/:key/assignments', async ({ headers, params, body: b }) =>
        assignRole(
          svc.sql,
          await project(await caller(headers), params.id, 'config:push'),
          params.key,
          body(b).customerId,
        ),
      )
      .delete('/customer-roles/:key/assignments/:customerId', async ({ headers, params }) =>
        revokeRole(
          svc.sql,
          await project(await caller(headers), params.id, 'config:push'),
          params.key,
          params.customerId,
        ),
      )
      .get('/customer-role-assignments', async ({ headers, params, query }) => ({
        assignments: await listAssignments(svc.sql, await project(await caller(headers), params.id, 'config:read'), {
          key: query.role,
          customerId: query.customer,
        }),
      }))
  );
}
