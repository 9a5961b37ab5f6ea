import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { tokenService } from '../../src/identity/tokens.ts';
import { createSession, revokeSession } from '../../src/identity/customer-sessions.ts';
import { newId } from '../../src/ids.ts';
import { contentData, eventsSocket, sse } from './support.ts';

/** CONTRACT §10: `/sse/{channel}` and `/_events` take a customer access token with no API key. */
let server: TestServer;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  server = await startTestServer();
  const models = [
    { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] },
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ] as never;
  p = await gqlProject(server, models, 'rt-tok');
  sk = await p.key('sk', ALL_SECRET);
});
afterAll(() => server.stop());

/** A customer whose token is stamped with `scopes` (its `scope` claim). */
async function customer(scopes: string[]) {
  const id = newId('cus');
  const email = `${id}@example.com`;
  await server.svc.sql`insert into customers (id, project_id, email) values (${id}, ${p.projectId}, ${email})`;
  const issued = await createSession(server.svc.sql, tokenService(server.svc), {
    projectId: p.projectId,
    customerId: id,
    email,
    scopes,
    roles: [],
  });
  return { id, ...issued };
}

const createPost = async (title: string) =>
  (await p.gql(sk, `mutation($t: String) { createPost(data: { title: $t }) { _id } }`, { t: title })).body.data
    .createPost._id as string;
const notify = (customerId: string, kind: string, data: Record<string, unknown>) =>
  server.svc.bus.publish({ type: 'notification.created', projectId: p.projectId, customerId, kind, data });
const sseStatus = async (channel: string, token: string) => {
  const res = await fetch(`${server.gatewayUrl}/sse/${encodeURIComponent(channel)}?token=${encodeURIComponent(token)}`);
  const body = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), body };
};

describe('token-only SSE', () => {
  test("the token's scopes open its own notifications and the models it may read; nothing else", async () => {
    const me = await customer(['records:read:post', 'notifications:read']);
    const them = await customer(['records:read', 'notifications:read']);
    const posts = sse(server.gatewayUrl, 'changes:post', { token: me.accessToken });
    const mine = sse(server.gatewayUrl, `notifications:${me.id}`, { token: me.accessToken });
    try {
      await eventually(() => posts.isConnected() && mine.isConnected());
      const id = await createPost('hello');
      await notify(me.id, 'order_shipped', { orderId: 'o-1' });
      await eventually(() => posts.events.length === 1 && mine.events.length === 1);
      expect(posts.events[0]).toEqual({
        channel: 'changes:post',
        event: 'record.created',
        data: contentData(server, { modelKey: 'post', recordId: id, action: 'created', userId: expect.any(String) }),
      });
      expect(mine.events[0]).toEqual({
        channel: `notifications:${me.id}`,
        event: 'notification.order_shipped',
        data: { orderId: 'o-1', customerId: me.id, kind: 'order_shipped' },
      });
      // Forbidden: another model, jobs, another customer's notifications. (changes:* carries the
      // models the token may read: test/realtime/wildcard.test.ts.)
      for (const channel of ['changes:page', 'jobs:*', `notifications:${them.id}`]) {
        const r = await sseStatus(channel, me.accessToken);
        expect({ channel, status: r.status, type: r.type }).toEqual({ channel, status: 403, type: 'application/json' });
        expect(JSON.parse(r.body).error).toBe('PERMISSION_DENIED');
      }
      // records:read covers changes:*; operations:read is still needed for jobs.
      expect((await sseStatus('jobs:*', them.accessToken)).status).toBe(403);
      const every = sse(server.gatewayUrl, 'changes:*', { token: them.accessToken });
      try {
        await eventually(() => every.isConnected());
      } finally {
        every.es.close();
      }
    } finally {
      posts.es.close();
      mine.es.close();
    }
  });

  test('a bad, tampered or foreign token answers 401 with a JSON body and no connected frame', async () => {
    const me = await customer(['records:read']);
    const tampered = me.accessToken.slice(0, -4) + (me.accessToken.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    for (const token of ['not-a-jwt', 'eyJhbGciOiJub25lIn0.eyJhdWQiOiJwcmpfeCJ9.', tampered]) {
      const r = await sseStatus('changes:post', token);
      expect(r.status).toBe(401);
      expect(r.type).toBe('application/json');
      expect(JSON.parse(r.body)).toEqual({ error: 'UNAUTHENTICATED', message: 'Invalid or expired token' });
      expect(r.body).not.toContain('connected');
    }
  });

  test('revoking the session closes a token-only stream', async () => {
    const me = await customer(['records:read']);
    const s = sse(server.gatewayUrl, 'changes:post', { token: me.accessToken });
    let errored = false;
    s.es.onerror = () => (errored = true);
    try {
      await eventually(() => s.isConnected());
      await revokeSession(server.svc.sql, tokenService(server.svc), p.projectId, me.sessionId);
      await eventually(() => errored, 3000);
      // The reconnect is refused: the token's session is gone.
      expect((await sseStatus('changes:post', me.accessToken)).status).toBe(401);
    } finally {
      s.es.close();
    }
  });
});

describe('token-only /_events', () => {
  test('subscribes to allowed channels and delivers; refuses forbidden ones', async () => {
    const me = await customer(['records:read:post', 'notifications:read']);
    const ws = await eventsSocket(server.gatewayUrl, { token: me.accessToken });
    try {
      ws.send({ type: 'subscribe', channel: 'changes:post' });
      ws.send({ type: 'subscribe', channel: `notifications:${me.id}` });
      ws.send({ type: 'subscribe', channel: 'changes:page' });
      ws.send({ type: 'subscribe', channel: 'jobs:*' });
      ws.send({ type: 'subscribe', channel: `notifications:${newId('cus')}` });
      await eventually(() => ws.frames.length === 5);
      expect(ws.frames[0]).toEqual({ type: 'subscribed', channel: 'changes:post' });
      expect(ws.frames[1]).toEqual({ type: 'subscribed', channel: `notifications:${me.id}` });
      expect(ws.frames[2]).toMatchObject({ type: 'error', channel: 'changes:page', error: 'forbidden' });
      expect(ws.frames[3]).toMatchObject({ type: 'error', channel: 'jobs:*', error: 'forbidden' });
      expect(ws.frames[4]).toMatchObject({ type: 'error', error: 'forbidden' });
      const id = await createPost('over ws');
      await notify(me.id, 'hello', { n: 1 });
      await eventually(() => ws.frames.length === 7);
      const got = ws.frames.slice(5).sort((a, b) => a.channel.localeCompare(b.channel));
      expect(got[0]).toEqual({
        channel: 'changes:post',
        event: 'record.created',
        data: contentData(server, { modelKey: 'post', recordId: id, action: 'created', userId: expect.any(String) }),
      });
      expect(got[1]).toEqual({
        channel: `notifications:${me.id}`,
        event: 'notification.hello',
        data: { n: 1, customerId: me.id, kind: 'hello' },
      });
    } finally {
      ws.ws.close();
    }
  });

  test('revoking the session closes a token-only socket with 4403', async () => {
    const me = await customer(['records:read']);
    const ws = await eventsSocket(server.gatewayUrl, { token: me.accessToken });
    ws.send({ type: 'subscribe', channel: 'changes:post' });
    await eventually(() => ws.frames.length === 1);
    expect(ws.frames[0]).toEqual({ type: 'subscribed', channel: 'changes:post' });
    await revokeSession(server.svc.sql, tokenService(server.svc), p.projectId, me.sessionId);
    await eventually(() => ws.closed() !== undefined, 3000);
    expect(ws.closed()!.code).toBe(4403);
  });

  test('a bad token is refused before the upgrade (401)', async () => {
    await expect(eventsSocket(server.gatewayUrl, { token: 'not-a-jwt' })).rejects.toThrow('socket failed');
    const res = await fetch(`${server.gatewayUrl}/_events?token=not-a-jwt`, {
      headers: {
        upgrade: 'websocket',
        connection: 'Upgrade',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version': '13',
      },
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'UNAUTHENTICATED', message: 'Invalid or expired token' });
  });
});
