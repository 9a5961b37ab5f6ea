import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { controlCaller } from './control-request.ts';
import type { ControlCaller, ControlPermission } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { PermissionDenied } from '../errors.ts';
import { applyCallback } from '../operations/callback.ts';
import { cancelExecution, getExecution, listExecutions, view } from '../operations/store.ts';
import { NotFound } from '../errors.ts';
import { listScheduleRuns, listSchedules, triggerSchedule } from '../operations/scheduler.ts';

/**
 * Operations on the API listener: the endpoints' progress callbacks (signed, no key), and the
 * control-plane views the CLI uses (`svc executions …`, `svc schedules …`, the signing secret).
 */
export function operationRoutes(svc: Service) {
  const project = async (headers: Record<string, string | undefined>, id: string, perm: ControlPermission) => {
    const c: ControlCaller = await controlCaller(svc, headers);
    const p = await projectOfCaller(svc.sql, c, id);
    if (!memberMay(c, perm, p.id))
      throw new PermissionDenied(
        perm === 'config:read' ? 'This role may not read this project' : 'This role may not change this project',
      );
    return p.id;
  };
  const deps = {
    sql: svc.sql,
    bus: svc.bus,
    secrets: svc.operations.secrets,
    executions: svc.operations.executions,
    retryBaseMs: svc.operations.retryBaseMs,
  };
  return new Elysia({ name: 'svc.operations' })
    .post(
      '/v1/operations/executions/:id/callback',
      async ({ params, request }) =>
        applyCallback(deps, params.id, await request.text(), request.headers.get('x-svc-signature')),
      { parse: 'none' },
    )
    .group('/v1/control/projects/:id', (app) =>
      app
        .get('/executions', async ({ headers, params, query }) => {
          const projectId = await project(headers, params.id, 'config:read');
          const rows = await listExecutions(svc.sql, projectId, {
            status: query.status || undefined,
            operationKey: query.operation || undefined,
            deadLetter: query.deadLetter === '1' || query.deadLetter === 'true',
            limit: query.limit ? Number(query.limit) || 50 : 50,
          });
          return { executions: rows.map(view) };
        })
        .get('/executions/:eid', async ({ headers, params }) => {
          const row = await getExecution(svc.sql, await project(headers, params.id, 'config:read'), params.eid);
          if (!row) throw new NotFound(`Execution ${params.eid} not found`);
          return { ...view(row), input: row.input, url: row.url, nextRunAt: row.next_run_at.toISOString() };
        })
        .post('/executions/:eid/cancel', async ({ headers, params }) =>
          view(await cancelExecution(svc.sql, svc.bus, await project(headers, params.id, 'config:push'), params.eid)),
        )
        .get('/schedules', async ({ headers, params }) => ({
          schedules: await listSchedules(svc.sql, await project(headers, params.id, 'config:read')),
        }))
        .get('/schedules/:key/runs', async ({ headers, params, query }) => ({
          runs: await listScheduleRuns(
            svc.sql,
            await project(headers, params.id, 'config:read'),
            params.key,
            query.limit ? Number(query.limit) || 50 : 50,
          ),
        }))
        .post('/schedules/:key/trigger', async ({ headers, params }) =>
          triggerSchedule(svc.sql, svc.bus, await project(headers, params.id, 'config:push'), params.key),
        )
        .get('/operations/signing-secret', async ({ headers, params }) => {
          const v = await svc.operations.secrets.current(await project(headers, params.id, 'keys:write'));
          return { secret: v.secret, version: v.version };
        })
        .post('/operations/signing-secret/rotate', async ({ headers, params }) => {
          const projectId = await project(headers, params.id, 'keys:write');
          const v = await svc.operations.secrets.rotate(projectId);
          await svc.bus.publish({
            type: 'custom',
            topic: 'operations.signing-secret',
            projectId,
            data: { version: v.version },
          });
          return { secret: v.secret, version: v.version };
        }),
    );
}
