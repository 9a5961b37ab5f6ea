import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/eventually.ts';
import { freePort } from '../../src/store/ports.ts';
import { endpoint, opsProject, waitStatus, type Endpoint, type OpsProject } from './support.ts';
import { waitForReady } from '../support/process.ts';

/**
 * Several processes on one PostgreSQL: hooks run once whichever process wrote the record and
 * whichever claims the execution; a worker killed mid-call leaves its execution to another.
 */
const ROOT = join(import.meta.dir, '..', '..');
let server: TestServer;
let ep: Endpoint;
const procs: Subprocess[] = [];
let hangFirst = true;

/** Starts `src/main.ts` on the test server's database and data folder; resolves when ready. */
async function spawn(env: Record<string, string>): Promise<Subprocess<'ignore', 'pipe', 'pipe'>> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) clean[k] = v;
  const proc = Bun.spawn([process.execPath, 'src/main.ts'], {
    cwd: ROOT,
    env: { ...clean, DATABASE_URL: server.databaseUrl, SVC_DATA_DIR: server.dataDir, SVC_ROOT_TOKEN: server.rootToken, SVC_BASE_URL: server.apiUrl, SVC_OPERATIONS_POLL_MS: '50', SVC_READ_POOL: '1', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  procs.push(proc);
  await waitForReady(proc);
  return proc;
}

beforeAll(async () => {
  server = await startTestServer({ SVC_ROLE: 'all', SVC_OPERATIONS_POLL_MS: '50' });
  ep = endpoint({
    '/index': (_r, body) => Response.json({ indexed: body.input.recordId }),
    // The first call never answers (its worker gets killed); the repeat answers at once.
    '/slow': (req) => {
      if (!hangFirst) return Response.json({ finished: true });
      hangFirst = false;
      return new Promise<Response>((resolve) => req.signal.addEventListener('abort', () => resolve(new Response('gone'))));
    },
  });
}, 30_000);

afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  ep.stop();
  await server.stop();
});

async function gqlAt(apiUrl: string, key: string, query: string, variables?: Record<string, unknown>): Promise<any> {
  const res = await fetch(`${apiUrl}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify({ query, variables }) });
  return res.json();
}

describe('operations across processes', () => {
  test('hooks run once per committed change with three processes writing and claiming', async () => {
    const p: OpsProject = await opsProject(server, 'multi');
    await p.push({
      operationBaseUrl: ep.url,
      models: [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }],
      operations: [{ key: 'index', endpoint: '/index' }],
      hooks: [{ key: 'onCreate', event: 'RECORD_CREATED', operationKey: 'index' }],
    });
    const key = await p.key(['records:read', 'records:write']);
    const others = await Promise.all([0, 1].map(async () => {
      const [port, rport] = [await freePort(), await freePort()];
      await spawn({ SVC_ROLE: 'all', PORT: String(port), REALTIME_PORT: String(rport) });
      return `http://127.0.0.1:${port}`;
    }));
    const apis = [server.apiUrl, ...others];
    const ids: string[] = [];
    await Promise.all(apis.map(async (api, n) => {
      for (let i = 0; i < 10; i++) {
        const r = await gqlAt(api, key, `mutation($t: String) { createPost(data: { title: $t }) { _id } }`, { t: `p${n}-${i}` });
        ids.push(r.data.createPost._id);
      }
    }));
    await eventually(() => ep.calls.filter((c) => c.path === '/index').length >= 30, 20_000);
    // Give a duplicate (if any) time to show up before counting.
    await Bun.sleep(500);
    const seen = ep.calls.filter((c) => c.path === '/index').map((c) => c.body.input.recordId);
    expect(seen.length).toBe(30);
    expect(new Set(seen)).toEqual(new Set(ids));
    const rows = await server.svc.sql<{ status: string; attempts: number }[]>`
      select status, attempts from operation_executions where project_id = ${p.projectId} and trigger = 'hook'`;
    expect(rows.length).toBe(30);
    expect(rows.every((r) => r.status === 'completed' && r.attempts === 1)).toBe(true);
  }, 90_000);

  test('a worker killed mid-call leaves its execution to another worker after the lease', async () => {
    // This test's API process runs no dispatcher: only the spawned workers claim.
    const api = await startTestServer({ DATABASE_URL: server.databaseUrl, SVC_ROLE: 'api' });
    try {
      const p = await opsProject(api, 'lease');
      await p.push({ operationBaseUrl: ep.url, operations: [{ key: 'slow', endpoint: '/slow', timeoutSeconds: 60 }] });
      const key = await p.key(['operations:execute', 'operations:read']);
      // Stop the first test's extra processes so the doomed worker is the only claimer.
      for (const proc of procs.splice(0)) proc.kill('SIGKILL');
      await server.svc.operations.dispatcher!.stop();
      const doomed = await spawn({ SVC_ROLE: 'worker', SVC_OPERATIONS_LEASE_MS: '600' });
      const r = await p.gql(key, `mutation { executeSlow { id } }`);
      const id = r.data.executeSlow.id;
      await eventually(() => ep.calls.some((c) => c.body?.executionId === id), 20_000);
      doomed.kill('SIGKILL');
      await doomed.exited;
      await spawn({ SVC_ROLE: 'worker', SVC_OPERATIONS_LEASE_MS: '600' });
      const done = await waitStatus(p, key, id, undefined, 30_000);
      expect(done).toMatchObject({ status: 'completed', resultJson: { finished: true }, attempts: 2 });
      const calls = ep.calls.filter((c) => c.body?.executionId === id);
      expect(calls.length).toBe(2);
      // The repeat carries the same idempotency key.
      expect(calls.map((c) => c.headers.get('idempotency-key'))).toEqual([id, id]);
    } finally {
      await api.stop();
    }
  }, 90_000);
});
