import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { collabInfo } from '../collab/info.ts';

/** `GET /collab/info` on the API listener (src/collab/info.ts). */
export function collabRoutes(svc: Service) {
  return new Elysia({ name: 'svc.collab' }).get('/collab/info', async ({ request, query }) => {
    const { key, headers } = await svc.gate.admit({ headers: request.headers });
    const snapshot = (await svc.projects.get(key.projectId)).snapshot;
    const info = await collabInfo(
      svc.sql,
      svc.settings.realtimeUrl,
      key,
      snapshot,
      query as Record<string, string | undefined>,
    );
    return new Response(JSON.stringify(info), {
      headers: { ...headers, 'content-type': 'application/json', 'cache-control': 'private, no-store' },
    });
  });
}
