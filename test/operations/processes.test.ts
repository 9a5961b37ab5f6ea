import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { join } from 'node:path';
import { createHmac } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/eventually.ts';
import { freePort } from '../../src/store/ports.ts';
import { endpoint, opsProject, waitStatus, type Endpoint, type OpsProject } from './support.ts';
import { gqlAt, waitForReady } from '../support/process.ts';
import { createExecution } from '../../src/operations/store.ts';

/**
 * Several processes on one PostgreSQL: hooks run once whichever process wrote the record and
 * whichever claims the execution; a worker killed mid-call leaves its execution to another.
 */
const ROOT = join(import.meta.dir, '..', '..');
let server: TestServer;
let ep: Endpoint;
const procs: Subprocess[] = [];
let hangFirst = true;
/** Calls of /gate in flight now, and the most seen at once. */
const gate = { inFlight: 0, max: 0, open: true };

/** Starts `src/main.ts` on the test server's database and data folder; resolves when ready. */
async function spawn(env: Record<string, string>): Promise<Subprocess<'ignore', 'pipe', 'pipe'>> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) clean[k] = v;
  const proc = Bun.spawn([process.execPath, 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...clean,
      DATABASE_URL: server.databaseUrl,
      SVC_DATA_DIR: server.dataDir,
      SVC_ROOT_TOKEN: server.rootToken,
      SVC_BASE_URL: server.apiUrl,
      SVC_OPERATIONS_POLL_MS: '50',
      SVC_READ_POOL: '1',
      ...env,
    },
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
      return new Promise<Response>((resolve) =>
        req.signal.addEventListener('abort', () => resolve(new Response('gone'))),
      );
    },
    '/echo': () => Response.json({ ok: true }),
    // Never answers: each worker that calls it gets killed (or the call is cancelled).
    '/doom': (req) =>
      new Promise<Response>((resolve) => req.signal.addEventListener('abort', () => resolve(new Response('gone')))),
    // Holds each call until the test opens the gate; counts concurrency.
    '/gate': async () => {
      gate.max = Math.max(gate.max, ++gate.inFlight);
      await until(async () => gate.open, 60_000);
      gate.inFlight--;
      return Response.json({ ok: true });
    },
  });
}, 30_000);

afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  ep.stop();
  await server.stop();
});

async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await Bun.sleep(20);
  }
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
    const others = await Promise.all(
      [0, 1].map(async () => {
        const [port, rport] = [await freePort(), await freePort()];
        await spawn({ SVC_ROLE: 'all', PORT: String(port), REALTIME_PORT: String(rport) });
        return `http://127.0.0.1:${port}`;
      }),
    );
    const apis = [server.apiUrl, ...others];
    const ids: string[] = [];
    await Promise.all(
      apis.map(async (api, n) => {
        for (let i = 0; i < 10; i++) {
          const r = await gqlAt(api, key, `mutation($t: String) { createPost(data: { title: $t }) { _id } }`, {
            t: `p${n}-${i}`,
          });
          ids.push(r.data.createPost._id);
        }
      }),
    );
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

  test('an execution whose worker dies on every attempt ends failed (worker_lost) after SVC_OPERATIONS_LEASE_ATTEMPTS claims', async () => {
    const api = await startTestServer({ DATABASE_URL: server.databaseUrl, SVC_ROLE: 'api' });
    try {
      const p = await opsProject(api, 'doom');
      await p.push({ operationBaseUrl: ep.url, operations: [{ key: 'doom', endpoint: '/doom', timeoutSeconds: 60 }] });
      const key = await p.key(['operations:execute', 'operations:read']);
      for (const proc of procs.splice(0)) proc.kill('SIGKILL');
      await server.svc.operations.dispatcher!.stop();
      const env = { SVC_ROLE: 'worker', SVC_OPERATIONS_LEASE_MS: '600', SVC_OPERATIONS_LEASE_ATTEMPTS: '2' };
      const r = await p.gql(key, `mutation { executeDoom { id } }`);
      const id = r.data.executeDoom.id;
      const calls = () => ep.calls.filter((c) => c.body?.executionId === id).length;
      for (const n of [1, 2]) {
        const worker = await spawn(env);
        await eventually(() => calls() === n, 20_000);
        worker.kill('SIGKILL');
        await worker.exited;
      }
      // A third worker does not call again: it ends the execution.
      await spawn(env);
      const done = await waitStatus(p, key, id, undefined, 30_000);
      expect(done).toMatchObject({ status: 'failed', attempts: 2, errorJson: { reason: 'worker_lost', attempts: 2 } });
      expect(calls()).toBe(2);
    } finally {
      await api.stop();
    }
  }, 90_000);

  test('two workers claiming at the same instant keep a project within SVC_OPERATIONS_CONCURRENCY', async () => {
    const api = await startTestServer({ DATABASE_URL: server.databaseUrl, SVC_ROLE: 'api' });
    try {
      const p = await opsProject(api, 'capped');
      await p.push({ operationBaseUrl: ep.url, operations: [{ key: 'gate', endpoint: '/gate' }] });
      const key = await p.key(['operations:execute', 'operations:read']);
      for (const proc of procs.splice(0)) proc.kill('SIGKILL');
      await server.svc.operations.dispatcher!.stop();
      // Different capacities give the two claim statements different candidate windows (the
      // bug this guards against: each saw the project below its cap and took a different row).
      await Promise.all(
        ['1', '64'].map(async (capacity) => {
          const [port, rport] = [await freePort(), await freePort()];
          await spawn({
            SVC_ROLE: 'worker',
            PORT: String(port),
            REALTIME_PORT: String(rport),
            SVC_OPERATIONS_CONCURRENCY: '2',
            SVC_OPERATIONS_CAPACITY: capacity,
          });
        }),
      );
      const sql = server.svc.sql;
      // Both workers' claim loops blocked on the executions table (not the lease renewals).
      const bothWaiting = () =>
        until(async () => {
          const [r] = await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query not like '%set lease_until%'`;
          return r!.n >= 2;
        }, 30_000);
      const live = async () =>
        (
          await sql<{ n: number }[]>`select count(*)::int as n from operation_executions
        where project_id = ${p.projectId} and status in ('dispatched', 'running')`
        )[0]!.n;
      gate.open = false;
      gate.max = 0;
      const ids: string[] = [];
      // Thirty executions become visible to both workers at the same instant: the lock holds both
      // claim loops until the commit, so each statement's snapshot starts together.
      await sql.begin(async (tx) => {
        await tx`lock table operation_executions in share mode`;
        for (let i = 0; i < 30; i++)
          ids.push(
            (
              await createExecution(tx as unknown as typeof sql, {
                projectId: p.projectId,
                operationKey: 'gate',
                input: null,
              })
            ).id,
          );
        await bothWaiting();
      });
      await until(async () => (await live()) >= 2, 30_000);
      // Once both loops wait again, both have claimed after the commit: the count is final.
      let afterClaims = -1;
      await sql.begin(async (tx) => {
        await tx`lock table operation_executions in share mode`;
        await bothWaiting();
        afterClaims = (
          await tx<{ n: number }[]>`select count(*)::int as n from operation_executions
          where project_id = ${p.projectId} and status in ('dispatched', 'running')`
        )[0]!.n;
      });
      expect(afterClaims).toBe(2);
      // Both claimed calls reach the endpoint (the calls go out after the claims commit).
      await until(async () => gate.inFlight === 2, 30_000);
      gate.open = true;
      for (const id of ids) expect((await waitStatus(p, key, id, undefined, 60_000)).status).toBe('completed');
      expect(gate.max).toBe(2);
    } finally {
      gate.open = true;
      await api.stop();
    }
  }, 120_000);

  test("a cancel through the API process aborts the call the worker process is making; a rotation there re-signs the worker's next call", async () => {
    // One deployment: the same data folder (its vault key encrypts the signing secrets).
    const api = await startTestServer({
      DATABASE_URL: server.databaseUrl,
      SVC_DATA_DIR: server.dataDir,
      SVC_ROLE: 'api',
    });
    try {
      const p = await opsProject(api, 'remote');
      await p.push({
        operationBaseUrl: ep.url,
        operations: [
          { key: 'doom', endpoint: '/doom', timeoutSeconds: 60 },
          { key: 'echo', endpoint: '/echo' },
        ],
      });
      const key = await p.key(['operations:execute', 'operations:read']);
      for (const proc of procs.splice(0)) proc.kill('SIGKILL');
      await server.svc.operations.dispatcher!.stop();
      await spawn({ SVC_ROLE: 'worker' });
      const r = await p.gql(key, `mutation { executeDoom { id } }`);
      const id = r.data.executeDoom.id;
      await eventually(() => ep.calls.some((c) => c.body?.executionId === id), 20_000);
      const c = await p.gql(key, `mutation($id: String!) { cancelOperationExecution(id: $id) { status } }`, { id });
      expect(c.data.cancelOperationExecution.status).toBe('cancelled');
      await eventually(() => ep.aborted.has(id), 20_000);
      expect((await waitStatus(p, key, id)).status).toBe('cancelled');

      // The worker caches the secret; the rotation announced by the API process reaches it.
      const first = await p.gql(key, `mutation { executeEcho { id } }`);
      await waitStatus(p, key, first.data.executeEcho.id);
      const res = await fetch(`${api.apiUrl}/v1/control/projects/${p.projectId}/operations/signing-secret/rotate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${p.ownerKey}` },
      });
      const rotated = ((await res.json()) as { secret: string }).secret;
      const second = await p.gql(key, `mutation { executeEcho { id } }`);
      const sid = second.data.executeEcho.id;
      await waitStatus(p, key, sid);
      const call = ep.calls.find((x) => x.body?.executionId === sid)!;
      const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(call.headers.get('x-svc-signature')!)!;
      expect(v1).toBe(createHmac('sha256', rotated).update(`${t}.${call.raw}`).digest('hex'));
    } finally {
      await api.stop();
    }
  }, 90_000);
});
