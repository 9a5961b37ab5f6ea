import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { spawnService } from '../support/process.ts';
import { eventsSocket, sse } from './support.ts';

/**
 * Several processes on one database behave as one service (CONTRACT §2): a write through one
 * API process reaches SSE and /_events subscribers of a gateway process and /graphql/ws
 * subscribers of another API process; an execution update from a worker reaches both.
 */
const ROOT = join(import.meta.dir, '..', '..');
let worker: TestServer;
const procs: { proc: ReturnType<typeof Bun.spawn>; url: string }[] = [];
let p: GqlProject;

async function spawn(role: string, databaseUrl: string, rootToken: string, dataDir: string) {
  const { proc, url } = await spawnService(
    { DATABASE_URL: databaseUrl, SVC_ROOT_TOKEN: rootToken, SVC_DATA_DIR: dataDir, SVC_READ_POOL: '1' },
    { role, cwd: ROOT },
  );
  procs.push({ proc, url });
  return url;
}

let writer: string;
let subscriber: string;
let gateway: string;

beforeAll(async () => {
  worker = await startTestServer({ SVC_ROLE: 'worker' });
  [writer, subscriber, gateway] = await Promise.all([
    spawn('api', worker.databaseUrl, worker.rootToken, worker.dataDir),
    spawn('api', worker.databaseUrl, worker.rootToken, worker.dataDir),
    spawn('gateway', worker.databaseUrl, worker.rootToken, worker.dataDir),
  ]);
  p = await gqlProject(
    { ...worker, apiUrl: writer },
    [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }],
    'rt-procs',
  );
}, 60_000);

afterAll(async () => {
  for (const { proc } of procs) proc.kill('SIGTERM');
  await Promise.all(procs.map((x) => x.proc.exited));
  await worker.stop();
});

describe('realtime across processes', () => {
  test('a write through one API process reaches SSE, /_events and /graphql/ws subscribers of the others, in order', async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const reader = await p.key('sk', ['records:read', 'operations:read']);
    await worker.svc
      .sql`insert into operation_executions (id, project_id, operation_key, url, status) values ('exe_x', ${p.projectId}, 'op', 'http://127.0.0.1:9/op', 'completed')`;
    const stream = sse(gateway, 'changes:post', { apiKey: reader });
    const ws = await eventsSocket(gateway, { apiKey: reader });
    ws.send({ type: 'subscribe', channel: 'changes:*' });
    ws.send({ type: 'subscribe', channel: 'jobs:*' });
    const gql = createClient({
      url: `${subscriber.replace(/^http/, 'ws')}/graphql/ws`,
      connectionParams: { apiKey: reader },
      retryAttempts: 0,
    });
    const viaGql: any[] = [];
    const jobs: any[] = [];
    gql.subscribe(
      { query: 'subscription { recordChanged(modelKey: "post") { action recordId } }' },
      { next: (v) => viaGql.push(v.data), error: () => {}, complete: () => {} },
    );
    gql.subscribe(
      { query: 'subscription { operationExecution(id: "exe_x") { id status } }' },
      { next: (v) => jobs.push(v.data), error: () => {}, complete: () => {} },
    );
    try {
      await eventually(() => stream.isConnected() && ws.frames.length === 2, 5000);
      // graphql-ws does not acknowledge a subscription: probe until the other process hears.
      const probeEnd = Date.now() + 10_000;
      while (viaGql.length === 0 || jobs.length === 0) {
        if (Date.now() > probeEnd) throw new Error('the subscriber process never heard a probe');
        if (viaGql.length === 0) await p.gql(sk, `mutation { createPost(data: { title: "probe" }) { _id } }`);
        if (jobs.length === 0)
          await worker.svc.bus.publish({
            type: 'execution.changed',
            projectId: p.projectId,
            executionId: 'exe_x',
            operationKey: 'op',
            status: 'pending',
            progressPct: 0,
            progressMessage: null,
            resultJson: null,
            errorJson: null,
          });
        await Bun.sleep(200);
      }
      const id = (await p.gql(sk, `mutation { createPost(data: { title: "x" }) { _id } }`)).body.data.createPost._id;
      await p.gql(sk, `mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }`, { id });
      await p.gql(sk, `mutation($id: ID!) { deletePost(_id: $id) }`, { id });
      const mine = (events: any[]) =>
        events.filter((e) => e.data?.recordId === id || e.event === 'job.completed').map((e) => e.event);
      const gqlMine = () => viaGql.filter((d) => d.recordChanged.recordId === id).map((d) => d.recordChanged.action);
      const done = () => jobs.filter((j) => j.operationExecution.status === 'completed');
      // The record's events come through the outbox relay after each commit and the job's straight
      // from the worker's bus: two sources, whose order between them nothing promises. The job is
      // published once the record's three have arrived, so the order asserted is one we promise.
      await eventually(
        () => mine(stream.events).length === 3 && mine(ws.frames).length === 3 && gqlMine().length === 3,
        8000,
      );
      await worker.svc.bus.publish({
        type: 'execution.changed',
        projectId: p.projectId,
        executionId: 'exe_x',
        operationKey: 'op',
        status: 'completed',
        progressPct: null,
        progressMessage: null,
        resultJson: { ok: true },
        errorJson: null,
      });
      await eventually(() => mine(ws.frames).length === 4 && done().length === 1, 8000);
      expect(mine(stream.events)).toEqual(['record.created', 'record.published', 'record.deleted']);
      expect(mine(ws.frames)).toEqual(['record.created', 'record.published', 'record.deleted', 'job.completed']);
      expect(gqlMine()).toEqual(['created', 'published', 'deleted']);
      expect(done()).toEqual([{ operationExecution: { id: 'exe_x', status: 'completed' } }]);
    } finally {
      stream.es.close();
      ws.ws.close();
      await gql.dispose();
    }
  }, 30_000);

  test('SIGTERM drains the gateway: clients get a close frame they can reconnect on', async () => {
    const reader = await p.key('pk', ['records:read']);
    const ws = await eventsSocket(gateway, { apiKey: reader });
    const g = procs.find((x) => x.url === gateway)!;
    g.proc.kill('SIGTERM');
    await eventually(() => ws.closed() !== undefined, 10_000);
    expect(ws.closed()!.code).toBe(1012);
    expect(await g.proc.exited).toBe(0);
  }, 20_000);
});
