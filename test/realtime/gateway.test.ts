import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { updateApiKey } from '../../src/auth/api-keys.ts';
import { hashSecret } from '../../src/ids.ts';
import { contentData, eventsSocket, sse } from './support.ts';

let server: TestServer;
let p: GqlProject;
let other: GqlProject;
let sk: string;
let reader: string;

beforeAll(async () => {
  server = await startTestServer({
    SVC_REALTIME_CONNECTIONS_PER_IDENTITY: '6',
    SVC_REALTIME_SUBSCRIPTIONS_PER_CONNECTION: '3',
    SVC_SSE_HEARTBEAT_MS: '300',
  });
  const models = [
    { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] },
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ] as never;
  p = await gqlProject(server, models, 'rt-a');
  other = await gqlProject(server, models, 'rt-b');
  sk = await p.key('sk', ALL_SECRET);
  reader = await p.key('pk', ['records:read']);
});
afterAll(() => server.stop());

const create = async (g: GqlProject, key: string, title: string) =>
  (await g.gql(key, `mutation($t: String) { createPost(data: { title: $t }) { _id } }`, { t: title })).body.data
    .createPost._id as string;

describe('SSE /sse/{channel}', () => {
  test('opens with connected, then delivers the five record actions of a model in commit order', async () => {
    const s = sse(server.gatewayUrl, 'changes:post', { apiKey: reader });
    const all = sse(server.gatewayUrl, 'changes:*', { apiKey: reader });
    try {
      await eventually(() => s.isConnected() && all.isConnected());
      const id = await create(p, sk, 'one');
      await p.gql(sk, `mutation($id: ID!) { updatePost(_id: $id, data: { title: "two" }) { _id } }`, { id });
      await p.gql(sk, `mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }`, { id });
      await p.gql(sk, `mutation($id: ID!) { unpublishPost(_id: $id) { _id } }`, { id });
      await p.gql(sk, `mutation($id: ID!) { deletePost(_id: $id) }`, { id });
      await p.gql(sk, `mutation { createPage(data: { title: "elsewhere" }) { _id } }`);
      await eventually(() => s.events.length === 5 && all.events.length === 6);
      expect(s.events.map((e) => e.event)).toEqual([
        'record.created',
        'record.updated',
        'record.published',
        'record.unpublished',
        'record.deleted',
      ]);
      expect(s.events[0]).toEqual({
        channel: 'changes:post',
        event: 'record.created',
        data: contentData(server, { modelKey: 'post', recordId: id, action: 'created', userId: expect.any(String) }),
      });
      expect(all.events.map((e) => e.data.modelKey)).toEqual(['post', 'post', 'post', 'post', 'post', 'page']);
      expect(all.events[5].channel).toBe('changes:*');
    } finally {
      s.es.close();
      all.es.close();
    }
  });

  test("another project's writes never reach the channel, and a rolled-back batch announces nothing", async () => {
    const s = sse(server.gatewayUrl, 'changes:post', { apiKey: reader });
    try {
      await eventually(() => s.isConnected());
      const otherSk = await other.key('sk', ALL_SECRET);
      await create(other, otherSk, 'not yours');
      const failed = await p.gql(
        sk,
        `mutation { batchRecordOperations(operations: [{ action: CREATE, modelKey: "post", data: { title: "x" } }, { action: DELETE, _id: "rec_missing" }]) { _id } }`,
      );
      expect(failed.body.errors).toBeDefined();
      const id = await create(p, sk, 'after');
      await eventually(() => s.events.length >= 1);
      await Bun.sleep(200);
      expect(s.events.map((e) => e.data.recordId)).toEqual([id]);
    } finally {
      s.es.close();
    }
  });

  test('Last-Event-ID resumes from the replay buffer', async () => {
    const s = sse(server.gatewayUrl, 'changes:page', { apiKey: reader });
    await eventually(() => s.isConnected());
    await p.gql(sk, `mutation { createPage(data: { title: "a" }) { _id } }`);
    await eventually(() => s.events.length === 1);
    const last = s.ids[0]!;
    s.es.close();
    await p.gql(sk, `mutation { createPage(data: { title: "b" }) { _id } }`);
    await p.gql(sk, `mutation { createPage(data: { title: "c" }) { _id } }`);
    const again = sse(server.gatewayUrl, 'changes:page', { apiKey: reader }, { 'last-event-id': last });
    try {
      await eventually(() => again.events.length === 2);
      expect(again.events.map((e) => e.event)).toEqual(['record.created', 'record.created']);
      expect(again.ids[0]! > last).toBe(true);
    } finally {
      again.es.close();
    }
  });

  test('refusals are JSON with no connected frame: bad key 401, unknown channel 404, missing scope 403, token 401', async () => {
    const get = (channel: string, q: string) => fetch(`${server.gatewayUrl}/sse/${encodeURIComponent(channel)}?${q}`);
    const bad = await get('changes:post', 'apiKey=pk_nope');
    expect(bad.status).toBe(401);
    expect(bad.headers.get('content-type')).toContain('application/json');
    expect(await bad.json()).toEqual({ error: 'UNAUTHENTICATED', message: 'Authentication required' });
    expect((await get('changes:post', 'token=not-a-token')).status).toBe(401);
    expect((await get('nothing:here', `apiKey=${reader}`)).status).toBe(404);
    expect((await get('changes:nomodel', `apiKey=${reader}`)).status).toBe(404);
    const jobs = await get('jobs:*', `apiKey=${reader}`);
    expect(jobs.status).toBe(403);
    expect(((await jobs.json()) as { message: string }).message).toBe('missing required scope: operations:read');
    expect((await get(`notifications:cus_1`, `apiKey=${reader}`)).status).toBe(403);
    // An execution of another project is as unknown as one that never existed.
    const ops = await p.key('sk', ['operations:read']);
    await server.svc
      .sql`insert into operation_executions (id, project_id, operation_key, url, status) values ('exe_other', ${other.projectId}, 'op', 'http://127.0.0.1:9/op', 'completed')`;
    expect((await get('jobs:exe_other', `apiKey=${ops}`)).status).toBe(404);
  });

  test('a heartbeat comment comes on the configured interval', async () => {
    const res = await fetch(`${server.gatewayUrl}/sse/changes:post?apiKey=${reader}`);
    const reader2 = res.body!.getReader();
    let text = '';
    const end = Date.now() + 3000;
    while (!text.includes(': heartbeat') && Date.now() < end)
      text += new TextDecoder().decode((await reader2.read()).value);
    await reader2.cancel();
    expect(text.startsWith('event: connected\n')).toBe(true);
    expect(text).toContain(': heartbeat\n\n');
  });
});

describe('/_events WebSocket', () => {
  test('subscribe and unsubscribe are answered; events arrive as { channel, event, data }', async () => {
    const c = await eventsSocket(server.gatewayUrl, { apiKey: reader });
    try {
      c.send({ type: 'subscribe', channel: 'changes:post' });
      c.send({ type: 'subscribe', channel: 'changes:nomodel' });
      c.send({ type: 'subscribe', channel: 'bogus' });
      c.send({ type: 'subscribe', channel: 'jobs:*' });
      await eventually(() => c.frames.length === 4);
      expect(c.frames).toEqual([
        { type: 'subscribed', channel: 'changes:post' },
        { type: 'error', channel: 'changes:nomodel', error: 'unknown_channel', message: expect.any(String) },
        { type: 'error', channel: 'bogus', error: 'unknown_channel', message: 'Unknown channel' },
        { type: 'error', channel: 'jobs:*', error: 'forbidden', message: 'missing required scope: operations:read' },
      ]);
      let status: unknown;
      const end = Date.now() + 3000;
      while (Date.now() < end) {
        status = await (await fetch(`${server.gatewayUrl}/api/realtime/status`)).json();
        if (JSON.stringify(status) === JSON.stringify({ channels: 1, clients: 1 })) break;
        await Bun.sleep(50);
      }
      expect(status).toEqual({ channels: 1, clients: 1 });
      const id = await create(p, sk, 'ws');
      await eventually(() => c.frames.length === 5);
      expect(c.frames[4]).toEqual({
        channel: 'changes:post',
        event: 'record.created',
        data: contentData(server, { modelKey: 'post', recordId: id, action: 'created', userId: expect.any(String) }),
      });
      c.send({ type: 'unsubscribe', channel: 'changes:post' });
      await eventually(() => c.frames.length === 6);
      expect(c.frames[5]).toEqual({ type: 'unsubscribed', channel: 'changes:post' });
      await create(p, sk, 'unheard');
      await Bun.sleep(200);
      expect(c.frames.length).toBe(6);
    } finally {
      c.ws.close();
    }
  });

  test('a model-restricted key cannot subscribe to an unlisted model; its changes:* carries its models only (test/realtime/wildcard.test.ts)', async () => {
    const restricted = await p.key('pk', ['records:read'], ['page']);
    const c = await eventsSocket(server.gatewayUrl, { apiKey: restricted });
    try {
      c.send({ type: 'subscribe', channel: 'changes:page' });
      c.send({ type: 'subscribe', channel: 'changes:post' });
      c.send({ type: 'subscribe', channel: 'changes:*' });
      await eventually(() => c.frames.length === 3);
      expect(c.frames.map((f) => f.type)).toEqual(['subscribed', 'error', 'subscribed']);
      expect(c.frames[1]).toMatchObject({ error: 'forbidden', message: 'missing required scope: records:read:post' });
    } finally {
      c.ws.close();
    }
  });

  test('malformed and oversized frames close with 4400; a subscribe flood closes with 4429; a subscription cap answers an error', async () => {
    const a = await eventsSocket(server.gatewayUrl, { apiKey: reader });
    a.send('not json');
    await eventually(() => a.closed() !== undefined);
    expect(a.closed()!.code).toBe(4400);
    const b = await eventsSocket(server.gatewayUrl, { apiKey: reader });
    b.send(JSON.stringify({ type: 'subscribe', channel: 'x'.repeat(70 * 1024) }));
    await eventually(() => b.closed() !== undefined);
    expect(b.closed()!.code).toBe(4400);
    const c = await eventsSocket(server.gatewayUrl, { apiKey: reader });
    for (const ch of ['changes:post', 'changes:page', 'changes:*', 'changes:post'])
      c.send({ type: 'subscribe', channel: ch });
    c.send({ type: 'subscribe', channel: 'jobs:x' });
    await eventually(() => c.frames.length === 5);
    expect(c.frames[4]).toMatchObject({ type: 'error', error: 'too_many_subscriptions' });
    for (let i = 0; i < 300; i++) c.send({ type: 'unsubscribe', channel: 'changes:post' });
    await eventually(() => c.closed() !== undefined);
    expect(c.closed()!.code).toBe(4429);
  });

  test('connections past the per-identity cap are refused with 429 and a JSON body', async () => {
    const key = await p.key('pk', ['records:read']);
    const held = [];
    for (let i = 0; i < 6; i++) held.push(await eventsSocket(server.gatewayUrl, { apiKey: key }));
    try {
      const res = await fetch(`${server.gatewayUrl}/sse/changes:post?apiKey=${key}`);
      expect(res.status).toBe(429);
      expect(await res.json()).toMatchObject({ error: 'connection_limit_exceeded', limit: 6, held: 6 });
      await expect(eventsSocket(server.gatewayUrl, { apiKey: key })).rejects.toThrow();
    } finally {
      for (const h of held) h.ws.close();
    }
    await eventually(() => true);
  });

  test('disabling the key closes its sockets with 4403 and ends its streams', async () => {
    const created = await p.key('pk', ['records:read']);
    const [row] = await server.svc.sql<
      { id: string }[]
    >`select id from api_keys where key_hash = ${hashSecret(created)}`;
    const c = await eventsSocket(server.gatewayUrl, { apiKey: created });
    c.send({ type: 'subscribe', channel: 'changes:post' });
    await eventually(() => c.frames.length === 1);
    const stream = (await fetch(`${server.gatewayUrl}/sse/changes:post?apiKey=${created}`)).body!.getReader();
    await stream.read(); // connected
    let ended = false;
    void (async () => {
      while (!(await stream.read().catch(() => ({ done: true }))).done);
      ended = true;
    })();
    const t0 = Date.now();
    await updateApiKey(server.svc.sql, server.svc.bus, p.tenantId, row!.id, { disabled: true });
    await eventually(() => c.closed() !== undefined, 1000);
    expect(c.closed()!.code).toBe(4403);
    expect(Date.now() - t0).toBeLessThan(1000);
    await eventually(() => ended, 1000);
  });
});
