import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Client } from 'graphql-ws';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { updateApiKey } from '../../src/auth/api-keys.ts';
import { hashSecret } from '../../src/ids.ts';
import { collect, wsClient } from './support.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
const clients: Client[] = [];

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(
    server,
    [
      { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] },
      { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
    ] as never,
    'gws',
  );
  sk = await p.key('sk', ALL_SECRET);
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await server.stop();
});

function client(params: Record<string, unknown>, url = server.apiUrl) {
  return wsClient(url, params, clients);
}

/** Live channels of the process (the gateway's status counts subscriptions of /graphql/ws too). */
async function channelsAre(n: number): Promise<void> {
  const end = Date.now() + 3000;
  for (;;) {
    const { channels } = (await (await fetch(`${server.gatewayUrl}/api/realtime/status`)).json()) as {
      channels: number;
    };
    if (channels === n) return;
    if (Date.now() > end) throw new Error(`expected ${n} live channels, have ${channels}`);
    await Bun.sleep(20);
  }
}

const RECORD = 'subscription($m: String!) { recordChanged(modelKey: $m) { action recordId modelKey userId } }';

describe('/graphql/ws', () => {
  test('recordChanged delivers the flat payload for each of the five actions, in order', async () => {
    const reader = await p.key('pk', ['records:read']);
    await channelsAre(0);
    const { c } = client({ apiKey: reader });
    const s = collect(c, RECORD, { m: 'post' });
    await channelsAre(1); // subscribed: events from now on are delivered
    const id = (await p.gql(sk, `mutation { createPost(data: { title: "a" }) { _id } }`)).body.data.createPost._id;
    await p.gql(sk, `mutation($id: ID!) { updatePost(_id: $id, data: { title: "b" }) { _id } }`, { id });
    await p.gql(sk, `mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }`, { id });
    await p.gql(sk, `mutation($id: ID!) { unpublishPost(_id: $id) { _id } }`, { id });
    await p.gql(sk, `mutation { createPage(data: { title: "other model" }) { _id } }`);
    await p.gql(sk, `mutation($id: ID!) { deletePost(_id: $id) }`, { id });
    await eventually(() => s.got.length === 5, 3000);
    expect(s.got.map((g) => g.data.recordChanged.action)).toEqual([
      'created',
      'updated',
      'published',
      'unpublished',
      'deleted',
    ]);
    expect(s.got[0]).toEqual({
      data: { recordChanged: { action: 'created', recordId: id, modelKey: 'post', userId: expect.any(String) } },
    });
    s.stop();
  });

  test('operationExecution follows one execution', async () => {
    const ops = await p.key('sk', ['operations:read']);
    await server.svc
      .sql`insert into operation_executions (id, project_id, operation_key, url, status) values ('exe_1', ${p.projectId}, 'op', 'http://127.0.0.1:9/op', 'completed')`;
    await channelsAre(0);
    const { c } = client({ apiKey: ops });
    const s = collect(
      c,
      'subscription($id: String!) { operationExecution(id: $id) { id status progressPct progressMessage resultJson errorJson } }',
      { id: 'exe_1' },
    );
    await channelsAre(1);
    const base = { type: 'execution.changed' as const, projectId: p.projectId, operationKey: 'op', errorJson: null };
    await server.svc.bus.publish({
      ...base,
      executionId: 'exe_2',
      status: 'running',
      progressPct: 5,
      progressMessage: null,
      resultJson: null,
    });
    await server.svc.bus.publish({
      ...base,
      executionId: 'exe_1',
      status: 'running',
      progressPct: 50,
      progressMessage: 'half',
      resultJson: null,
    });
    // A result too large for one NOTIFY still arrives whole.
    const big = { rows: 'x'.repeat(10_000) };
    await server.svc.bus.publish({
      ...base,
      executionId: 'exe_1',
      status: 'completed',
      progressPct: null,
      progressMessage: null,
      resultJson: big,
    });
    await eventually(() => s.got.length === 2, 3000);
    expect(s.got[0].data.operationExecution).toEqual({
      id: 'exe_1',
      status: 'running',
      progressPct: 50,
      progressMessage: 'half',
      resultJson: null,
      errorJson: null,
    });
    expect(s.got[1].data.operationExecution).toMatchObject({ status: 'completed', resultJson: big });
    s.stop();
  });

  test("the key's pruned schema and scopes decide what may be subscribed", async () => {
    const restricted = await p.key('pk', ['records:read'], ['page']);
    const { c } = client({ apiKey: restricted });
    const denied = collect(c, RECORD, { m: 'post' });
    const unknownField = collect(c, 'subscription { nope }');
    const noOps = collect(c, 'subscription { operationExecution(id: "x") { id } }');
    const ops = await p.key('sk', ['operations:read']);
    const unknown = collect(
      client({ apiKey: ops }).c,
      'subscription { operationExecution(id: "exe_elsewhere") { id } }',
    );
    await eventually(
      () => [denied, unknownField, noOps, unknown].every((s) => s.state.error !== undefined || s.got.length > 0),
      3000,
    );
    const message = (s: ReturnType<typeof collect>) => JSON.stringify(s.state.error ?? s.got);
    expect(message(denied)).toContain('missing required scope: records:read:post');
    expect(message(unknownField)).toContain('Cannot query field');
    expect(message(noOps)).toContain('missing required scope: operations:read');
    expect(message(unknown)).toContain('No execution');
    expect(message(unknown)).toContain('NOT_FOUND');
  });

  test('a bad key closes with 4401; disabling the key closes a live connection with 4403 within a second', async () => {
    const bad = client({ apiKey: 'pk_nothing' });
    await eventually(() => bad.closes.length > 0, 3000);
    expect(bad.closes[0]!.code).toBe(4401);

    const key = await p.key('pk', ['records:read']);
    await channelsAre(0);
    const live = client({ apiKey: key });
    const s = collect(live.c, RECORD, { m: 'post' });
    await channelsAre(1);
    const [row] = await server.svc.sql<{ id: string }[]>`select id from api_keys where key_hash = ${hashSecret(key)}`;
    const t0 = Date.now();
    await updateApiKey(server.svc.sql, server.svc.bus, p.tenantId, row!.id, { disabled: true });
    await eventually(() => live.closes.length > 0, 1000);
    expect(live.closes[0]!.code).toBe(4403);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(s.got).toEqual([]);
  });
});
