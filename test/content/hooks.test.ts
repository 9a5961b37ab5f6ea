import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/eventually.ts';
import { sign } from '../../src/operations/signing.ts';
import { endpoint, opsProject, type Endpoint, type OpsProject } from '../operations/support.ts';

let server: TestServer;
let ep: Endpoint;
let p: OpsProject;
let key: string;
let flaky = 0;
let secret: string;
let slowFirst = 0;

beforeAll(async () => {
  server = await startTestServer({ SVC_OPERATIONS_POLL_MS: '50', SVC_OPERATIONS_RETRY_MS: '20' });
  ep = endpoint({
    '/ok': (_r, body) => Response.json({ seen: body.input.recordId }),
    '/boom': () => new Response('down', { status: 503 }),
    '/flaky': () => (++flaky <= 2 ? new Response('try again', { status: 500 }) : Response.json({ ok: true })),
    '/accept': () => new Response(null, { status: 202 }),
    // The first call hangs (until aborted); later ones are accepted at once.
    '/slow-first': (req) =>
      ++slowFirst === 1
        ? new Promise<Response>((resolve) =>
            req.signal.addEventListener('abort', () => resolve(Response.json({ stale: true }))),
          )
        : new Response(null, { status: 202 }),
  });
  p = await opsProject(server, 'hooks');
  await p.push({
    operationBaseUrl: ep.url,
    models: [
      { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] },
      { key: 'note', name: 'Note', fields: [{ key: 'text', type: 'text' }] },
      { key: 'job', name: 'Job', fields: [{ key: 'kind', type: 'text' }] },
      { key: 'task', name: 'Task', fields: [{ key: 'kind', type: 'text' }] },
    ],
    operations: [
      { key: 'index', endpoint: '/ok' },
      { key: 'alert', endpoint: '/boom' },
      { key: 'sync', endpoint: '/flaky' },
      { key: 'async', endpoint: '/accept', timeoutSeconds: 60 },
      { key: 'async-quick', endpoint: '/accept', timeoutSeconds: 0.3 },
      { key: 'slow-first', endpoint: '/slow-first', timeoutSeconds: 60 },
    ],
    hooks: [
      { key: 'indexPost', event: 'RECORD_CREATED', operationKey: 'index', filter: { modelKey: 'post' } },
      { key: 'unindex', event: 'RECORD_DELETED', operationKey: 'index' },
      { key: 'syncPost', event: 'RECORD_UPDATED', operationKey: 'sync', filter: { modelKey: 'post' } },
      { key: 'alertNote', event: 'RECORD_CREATED', operationKey: 'alert', filter: { modelKey: 'note' } },
      { key: 'runJob', event: 'RECORD_CREATED', operationKey: 'async', filter: { modelKey: 'job' } },
      { key: 'touchJob', event: 'RECORD_UPDATED', operationKey: 'async-quick', filter: { modelKey: 'job' } },
      { key: 'runTask', event: 'RECORD_CREATED', operationKey: 'slow-first', filter: { modelKey: 'task' } },
    ],
  });
  const res = await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/operations/signing-secret`, {
    headers: { authorization: `Bearer ${p.ownerKey}` },
  });
  secret = ((await res.json()) as { secret: string }).secret;
  key = await p.key(['records:read', 'records:write', 'records:delete', 'operations:read']);
}, 30_000);

afterAll(async () => {
  ep.stop();
  await server.stop();
});

/** Waits for an asynchronous condition (a database read), polling. */
async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await Bun.sleep(25);
  }
}

const hookRows = () => server.svc.sql<
  { id: string; trigger_key: string; status: string; attempts: number; dead_letter: boolean; input: any }[]
>`
  select id, trigger_key, status, attempts, dead_letter, input from operation_executions where project_id = ${p.projectId} and trigger = 'hook' order by created_at`;

describe('hooks', () => {
  test('a created record runs its hook once with { event, modelKey, recordId, userId }; filter.modelKey restricts it', async () => {
    const r = await p.gql(key, `mutation { createPost(data: { title: "Hi" }) { _id } }`);
    const id = r.data.createPost._id;
    await eventually(() => ep.calls.some((c) => c.path === '/ok' && c.body.input.recordId === id), 10_000);
    const call = ep.calls.find((c) => c.path === '/ok' && c.body.input.recordId === id)!;
    expect(call.body.operationKey).toBe('index');
    expect(call.body.input).toMatchObject({ event: 'RECORD_CREATED', modelKey: 'post', recordId: id });
    expect(typeof call.body.input.userId).toBe('string');
    const rows = (await hookRows()).filter((h) => h.input.recordId === id);
    expect(rows.map((h) => h.trigger_key)).toEqual(['indexPost']);
  });

  test('a failing hook is retried with back-off, then dead-lettered and listed by `svc executions list --dead-letter`', async () => {
    const r = await p.gql(key, `mutation { createNote(data: { text: "x" }) { _id } }`);
    const id = r.data.createNote._id;
    let row: any;
    const end = Date.now() + 15_000;
    while (Date.now() < end) {
      row = (await hookRows()).find((h) => h.input.recordId === id);
      if (row?.status === 'failed') break;
      await Bun.sleep(50);
    }
    expect(row).toMatchObject({ trigger_key: 'alertNote', status: 'failed', attempts: 5, dead_letter: true });
    expect(ep.calls.filter((c) => c.body?.executionId === row.id).length).toBe(5);
    const listed = await cli(
      server,
      p.ownerKey,
      'executions',
      'list',
      '--project',
      p.projectId,
      '--dead-letter',
      '--json',
    );
    expect(listed.code).toBe(0);
    expect(listed.json.executions.map((e: any) => e.id)).toEqual([row.id]);
    expect(listed.json.executions[0]).toMatchObject({
      status: 'failed',
      deadLetter: true,
      trigger: 'hook',
      errorJson: { status: 503, body: 'down' },
    });
    const shown = await cli(server, p.ownerKey, 'executions', 'show', row.id, '--project', p.projectId, '--json');
    expect(shown.json).toMatchObject({
      id: row.id,
      input: { event: 'RECORD_CREATED', modelKey: 'note', recordId: id },
    });
  });

  test('a call that fails twice succeeds on the third attempt', async () => {
    const r = await p.gql(key, `mutation { createPost(data: { title: "a" }) { _id } }`);
    const id = r.data.createPost._id;
    await p.gql(key, `mutation($id: ID!) { updatePost(_id: $id, data: { title: "b" }) { _id } }`, { id });
    let row: any;
    const end = Date.now() + 15_000;
    while (Date.now() < end) {
      row = (await hookRows()).find((h) => h.input.recordId === id && h.trigger_key === 'syncPost');
      if (row?.status === 'completed') break;
      await Bun.sleep(50);
    }
    expect(row).toMatchObject({ status: 'completed', attempts: 3, dead_letter: false });
  });

  test('a rolled-back batch queues no hook; a delete runs the unfiltered hook', async () => {
    const before = (await hookRows()).length;
    const bad = await p.gql(
      key,
      `mutation { batchRecordOperations(operations: [
      { action: CREATE, modelKey: "post", data: { title: "never" } },
      { action: UPDATE, _id: "rec_missing", data: { title: "x" } }]) { _id } }`,
    );
    expect(bad.errors[0].extensions.code).toBe('NOT_FOUND');
    const r = await p.gql(key, `mutation { createNote(data: { text: "gone soon" }) { _id } }`);
    const id = r.data.createNote._id;
    await p.gql(key, `mutation($id: ID!) { deleteNote(_id: $id) }`, { id });
    await eventually(
      () => ep.calls.some((c) => c.body?.input?.event === 'RECORD_DELETED' && c.body.input.recordId === id),
      10_000,
    );
    // alertNote (created) + unindex (deleted); nothing from the rolled-back batch.
    const added = (await hookRows()).slice(before);
    expect(added.map((h) => [h.trigger_key, h.input.recordId])).toEqual([
      ['alertNote', id],
      ['unindex', id],
    ]);
  });

  test('a hook whose endpoint answers 202 and then reports failure by callback is retried, and completes on a later attempt', async () => {
    const r = await p.gql(key, `mutation { createJob(data: { kind: "a" }) { _id } }`);
    const recordId = r.data.createJob._id;
    const row = async () => (await hookRows()).find((h) => h.input.recordId === recordId && h.trigger_key === 'runJob');
    const calls = (id: string) => ep.calls.filter((c) => c.body?.executionId === id).length;
    await until(async () => (await row())?.status === 'running', 10_000);
    const id = (await row())!.id;
    expect(calls(id)).toBe(1);
    const callback = (body: unknown) => {
      const raw = JSON.stringify(body);
      return fetch(`${server.apiUrl}/v1/operations/executions/${id}/callback`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-svc-signature': sign(secret, raw) },
        body: raw,
      });
    };
    const failed = await callback({ status: 'failed', error: { reason: 'upstream down' } });
    expect(failed.status).toBe(200);
    // Not final: the hook goes back to pending and its endpoint is called again.
    expect(((await failed.json()) as { status: string }).status).toBe('pending');
    await until(async () => calls(id) === 2 && (await row())?.status === 'running', 10_000);
    expect((await callback({ status: 'completed', result: { done: true } })).status).toBe(200);
    expect(await row()).toMatchObject({ status: 'completed', attempts: 2, dead_letter: false });
  });

  test('a hook accepted with 202 that never calls back is retried after its timeout, then dead-lettered', async () => {
    const r = await p.gql(key, `mutation { createJob(data: { kind: "b" }) { _id } }`);
    const recordId = r.data.createJob._id;
    await p.gql(key, `mutation($id: ID!) { updateJob(_id: $id, data: { kind: "c" }) { _id } }`, { id: recordId });
    const row = async () =>
      (await hookRows()).find((h) => h.input.recordId === recordId && h.trigger_key === 'touchJob');
    await until(async () => (await row())?.status === 'timed_out', 20_000);
    const done = (await row())!;
    expect(done).toMatchObject({ status: 'timed_out', attempts: 5, dead_letter: true });
    expect(ep.calls.filter((c) => c.body?.executionId === done.id).length).toBe(5);
  });

  test('a failure reported by callback while the first call still hangs: the retry is claimed, the stale call aborted, only the new attempt counts', async () => {
    const r = await p.gql(key, `mutation { createTask(data: { kind: "t" }) { _id } }`);
    const recordId = r.data.createTask._id;
    const row = async () =>
      (await hookRows()).find((h) => h.input.recordId === recordId && h.trigger_key === 'runTask');
    const calls = (id: string) => ep.calls.filter((c) => c.body?.executionId === id).length;
    await until(async () => {
      const x = await row();
      return !!x && calls(x.id) === 1;
    }, 10_000);
    const id = (await row())!.id;
    const raw = JSON.stringify({ status: 'failed', error: { reason: 'gave up' } });
    const failed = await fetch(`${server.apiUrl}/v1/operations/executions/${id}/callback`, {
      method: 'POST',
      headers: { 'x-svc-signature': sign(secret, raw) },
      body: raw,
    });
    expect(failed.status).toBe(200);
    await until(async () => calls(id) === 2 && (await row())?.status === 'running', 10_000);
    await eventually(() => ep.aborted.has(id), 10_000);
    const done = JSON.stringify({ status: 'completed', result: { second: true } });
    expect(
      (
        await fetch(`${server.apiUrl}/v1/operations/executions/${id}/callback`, {
          method: 'POST',
          headers: { 'x-svc-signature': sign(secret, done) },
          body: done,
        })
      ).status,
    ).toBe(200);
    const [final] = await server.svc.sql<
      { status: string; attempts: number; result: unknown }[]
    >`select status, attempts, result from operation_executions where id = ${id}`;
    expect(final).toEqual({ status: 'completed', attempts: 2, result: { second: true } });
  });
});
