import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { callerOf, controlCaller } from './control-request.ts';
import { projectIdsOfTenant, projectOfCaller } from '../control/tenancy.ts';
import { projectOfKey } from '../auth/api-keys.ts';
import { PermissionDenied } from '../errors.ts';
import { auditFrom, listAudit, parseAuditQuery, recordAudit, type AuditWho } from '../editorial/audit.ts';

/**
 * The audit log on the control plane (docs/audit.md): `GET /v1/control/audit` for owners and
 * admins (and the root operator), and the entry every successful control-plane change leaves.
 */
export function auditRoutes(svc: Service) {
  return new Elysia({ name: 'svc.audit' }).get('/v1/control/audit', async ({ headers, query, set }) => {
    const c = await controlCaller(svc, headers);
    const q = parseAuditQuery(query as Record<string, string | undefined>);
    set.headers['cache-control'] = 'no-store';
    let scope: { projectIds: string[] | null; tenantId: string | null };
    if (c.kind === 'root') {
      scope = q.projectId ? { projectIds: [q.projectId], tenantId: null } : { projectIds: null, tenantId: null };
    } else {
      if (c.role !== 'owner' && c.role !== 'admin')
        throw new PermissionDenied('The audit log is for owners and admins');
      if (q.projectId) {
        const p = await projectOfCaller(svc.sql, c, q.projectId);
        if (c.projectId !== null && c.projectId !== p.id)
          throw new PermissionDenied('This role may not read this project');
        scope = { projectIds: [p.id], tenantId: null };
      } else if (c.projectId !== null) {
        scope = { projectIds: [c.projectId], tenantId: null };
      } else {
        scope = { projectIds: await projectIdsOfTenant(svc.sql, c.tenantId), tenantId: c.tenantId };
      }
    }
    const page = await listAudit(svc.sql, { ...scope, since: q.since, actor: q.actor, first: q.first, after: q.after });
    return { entries: page.entries, pageInfo: { hasNextPage: page.hasNextPage, endCursor: page.endCursor } };
  });
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Records each successful control-plane change (`svc` commands, the Studio's settings screens):
 * action `METHOD route` (the route's pattern, so `POST /v1/control/projects/:id/config`), target
 * the route's resource and the last path parameter (or the id the answer names). Never a
 * request body: a pushed secret's value is not in the log, only that secrets were pushed. Written
 * after the answer (the routes own their transactions); a failed entry is logged, not answered.
 */
export function auditAfterResponse(
  svc: Service,
  ctx: {
    request: Request;
    route: string;
    headers: Record<string, string | undefined>;
    params?: Record<string, string>;
    responseValue: unknown;
    set: { status?: unknown };
    server?: { requestIP(r: Request): { address: string } | null } | null;
  },
): void {
  const { request, route } = ctx;
  if (!WRITES.has(request.method) || !route || !(route.startsWith('/v1/control') || route === '/v1/provision')) return;
  const status =
    ctx.responseValue instanceof Response
      ? ctx.responseValue.status
      : typeof ctx.set.status === 'number'
        ? ctx.set.status
        : 200;
  if (status >= 400) return;
  const caller = callerOf(ctx.headers);
  if (!caller) return;
  const who: AuditWho = caller.kind === 'root' ? { kind: 'root', id: null } : { kind: 'member', id: caller.memberId };
  const params = ctx.params ?? {};
  const statics = route.split('/').filter((s) => s && !s.startsWith(':') && s !== 'v1' && s !== 'control');
  const names = route
    .split('/')
    .filter((s) => s.startsWith(':'))
    .map((s) => s.slice(1));
  const answer = (ctx.responseValue && typeof ctx.responseValue === 'object' ? ctx.responseValue : {}) as Record<
    string,
    unknown
  >;
  const named = ['keyId', 'id', 'projectId', 'tenantId', 'memberId']
    .map((k) => answer[k])
    .find((v) => typeof v === 'string') as string | undefined;
  const lastParam = names.length ? params[names[names.length - 1]!] : undefined;
  // The project it changed: the route's, else the one the answer names (a key's `projectId`),
  // else the member's; none for tenant-level changes (tenants, members). The request body is
  // not read here: a hook naming it would make every route parse its body (test/http/body-limit).
  const str = (v: unknown) => (typeof v === 'string' && v.length <= 200 ? v : undefined);
  const projectId =
    (route.includes('/projects/:id') ? params.id : undefined) ??
    str(answer.projectId) ??
    (caller.kind === 'member' ? caller.projectId : null) ??
    null;
  const from = auditFrom(request.headers, ctx.server?.requestIP(request)?.address ?? null);
  const targetId = lastParam ?? named ?? null;
  const write = async () => {
    // A key created for a project answers with its id only: its project is the key's.
    const project = projectId ?? (targetId?.startsWith('key_') ? await projectOfKey(svc.sql, targetId) : null);
    await recordAudit(
      svc.sql,
      { projectId: project, tenantId: caller.kind === 'member' ? caller.tenantId : null },
      who,
      from,
      [{ action: `${request.method} ${route}`, kind: statics.join('.') || 'control', id: targetId }],
    );
  };
  void write().catch((err) => console.error('audit:', (err as Error).message));
}
