import { Elysia } from 'elysia';
import { controlCaller, objectBody } from './control-request.ts';
import type { Service } from '../service.ts';
import { publishRecordAsMember, saveRecordAsMember } from '../content/member-writes.ts';
import { lsnHeaders } from './replica-lsn.ts';

/** Record writes with a member's control key (`svc records save|publish`, docs/control-plane.md). */
export function recordRoutes(svc: Service) {
  return new Elysia({ prefix: '/v1/control/projects/:id/records' })
    .post('/', async ({ headers, params, body, set }) => {
      const out = await saveRecordAsMember(svc, await controlCaller(svc, headers), params.id, objectBody(body));
      Object.assign(set.headers, lsnHeaders(svc.replicas));
      return out;
    })
    .post('/:recordId/publish', async ({ headers, params, body, set }) => {
      const out = await publishRecordAsMember(
        svc,
        await controlCaller(svc, headers),
        params.id,
        params.recordId,
        objectBody(body),
      );
      Object.assign(set.headers, lsnHeaders(svc.replicas));
      return out;
    });
}
