import type { Server } from 'bun';
import { insertApiKey } from '../../src/auth/api-keys.ts';
import type { BusEvent } from '../../src/bus/bus.ts';
import { bootstrapProject, type TestServer } from '../support/server.ts';

/** A local HTTP endpoint the operations call; records what it received. */
export interface Endpoint {
  url: string;
  server: Server<unknown>;
  calls: { path: string; headers: Headers; body: any; raw: string }[];
  /** Resolved when the endpoint saw a request whose abort signal fired. */
  aborted: Set<string>;
  stop(): void;
}

export type Handler = (req: Request, body: any, raw: string) => Response | Promise<Response>;

export function endpoint(routes: Record<string, Handler>): Endpoint {
  const calls: Endpoint['calls'] = [];
  const aborted = new Set<string>();
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      const raw = await req.text();
      let body: any = null;
      try {
        body = JSON.parse(raw);
      } catch {}
      calls.push({ path, headers: req.headers, body, raw });
      req.signal.addEventListener('abort', () => aborted.add(body?.executionId ?? path));
      const h = routes[path];
      return h ? h(req, body, raw) : new Response('no route', { status: 404 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, server, calls, aborted, stop: () => server.stop(true) };
}

export interface OpsProject {
  projectId: string;
  ownerKey: string;
  key(scopes: string[], kind?: 'sk' | 'pk'): Promise<string>;
  gql(key: string, query: string, variables?: Record<string, unknown>): Promise<any>;
  push(config: Record<string, unknown>): Promise<any>;
  events: Extract<BusEvent, { type: 'execution.changed' }>[];
}

export async function opsProject(server: TestServer, name = 'ops'): Promise<OpsProject> {
  const { tenantId, projectId, ownerKey } = await bootstrapProject(server, name);
  const events: OpsProject['events'] = [];
  server.svc.bus.subscribe((e) => {
    if (e.type === 'execution.changed' && e.projectId === projectId) events.push(e);
  });
  return {
    projectId,
    ownerKey,
    events,
    async key(scopes, kind = 'sk') {
      return (
        await insertApiKey(server.svc.sql, {
          tenantId,
          projectId,
          kind,
          name: `k${Math.random()}`,
          scopes,
          allowedModels: null,
        })
      ).key;
    },
    async gql(key, query, variables) {
      const res = await fetch(`${server.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({ query, variables }),
      });
      return res.json();
    },
    async push(config) {
      const res = await fetch(`${server.apiUrl}/v1/control/projects/${projectId}/config`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ownerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ config: { key: 'cfg', name: 'cfg', ...config } }),
      });
      const out = await res.json();
      if (res.status !== 200 || (out as any).errors?.length) throw new Error(JSON.stringify(out));
      await (await server.svc.projects.get(projectId)).reload();
      return out;
    },
  };
}

export const EXECUTION =
  'id status operationKey progressPct progressMessage resultJson errorJson attempts trigger deadLetter';

/** Polls operationExecution until the status is terminal (or `want`). */
export async function waitStatus(p: OpsProject, key: string, id: string, want?: string, ms = 15_000): Promise<any> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await p.gql(key, `query($id: String!) { operationExecution(id: $id) { ${EXECUTION} } }`, { id });
    const e = r.data?.operationExecution;
    if (e && (want ? e.status === want : ['completed', 'failed', 'cancelled', 'timed_out'].includes(e.status)))
      return e;
    if (Date.now() > end) throw new Error(`execution ${id} stayed ${JSON.stringify(e ?? r)}`);
    await Bun.sleep(25);
  }
}
