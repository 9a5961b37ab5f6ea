import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from 'graphql-ws';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { tokenService } from '../../src/identity/tokens.ts';
import { createSession, revokeSession } from '../../src/identity/customer-sessions.ts';
import { newId } from '../../src/ids.ts';
import { eventsSocket, sse } from './support.ts';

let server: TestServer;
let p: GqlProject;
let key: string;

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }], 'rt-cust');
  key = await p.key('pk', ['records:read', 'notifications:read']);
});
afterAll(() => server.stop());

async function customer() {
  const id = newId('cus');
  const email = `${id}@example.com`;
  await server.svc.sql`insert into customers (id, project_id, email) values (${id}, ${p.projectId}, ${email})`;
  const issued = await createSession(server.svc.sql, tokenService(server.svc), {
    projectId: p.projectId,
    customerId: id,
    email,
    scopes: ['records:read'],
    roles: [],
  });
  return { id, ...issued };
}

const notify = (customerId: string, kind: string, data: Record<string, unknown>) =>
  server.svc.bus.publish({ type: 'notification.created', projectId: p.projectId, customerId, kind, data });

describe('customer channels', () => {
  test("a customer receives their own notifications over SSE and /_events, and cannot subscribe to another's", async () => {
    const me = await customer();
    const them = await customer();
    const stream = sse(server.gatewayUrl, `notifications:${me.id}`, { apiKey: key, token: me.accessToken });
    const ws = await eventsSocket(server.gatewayUrl, { apiKey: key, token: me.accessToken });
    try {
      ws.send({ type: 'subscribe', channel: `notifications:${me.id}` });
      ws.send({ type: 'subscribe', channel: `notifications:${them.id}` });
      await eventually(() => ws.frames.length === 2 && stream.isConnected());
      expect(ws.frames[0]).toEqual({ type: 'subscribed', channel: `notifications:${me.id}` });
      expect(ws.frames[1]).toMatchObject({ type: 'error', channel: `notifications:${them.id}`, error: 'forbidden' });
      const theirs = await fetch(
        `${server.gatewayUrl}/sse/notifications:${them.id}?apiKey=${key}&token=${me.accessToken}`,
      );
      expect(theirs.status).toBe(403);
      await notify(them.id, 'order_shipped', { orderId: 'o-2' });
      await notify(me.id, 'order_shipped', { orderId: 'o-1' });
      await eventually(() => stream.events.length === 1 && ws.frames.length === 3);
      const expected = {
        channel: `notifications:${me.id}`,
        event: 'notification.order_shipped',
        data: { orderId: 'o-1', customerId: me.id, kind: 'order_shipped' },
      };
      expect(stream.events[0]).toEqual(expected);
      expect(ws.frames[2]).toEqual(expected);
    } finally {
      stream.es.close();
      ws.ws.close();
    }
  });

  test('an invalid token on SSE is a 401 JSON body with no connected frame', async () => {
    const res = await fetch(`${server.gatewayUrl}/sse/changes:post?apiKey=${key}&token=eyJhbGciOiJub25lIn0.e30.`);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'UNAUTHENTICATED', message: 'Invalid or expired token' });
  });

  test('revoking the session closes its /_events and /graphql/ws connections with 4403 within a second', async () => {
    const me = await customer();
    const ws = await eventsSocket(server.gatewayUrl, { apiKey: key, token: me.accessToken });
    ws.send({ type: 'subscribe', channel: 'changes:post' });
    await eventually(() => ws.frames.length === 1);
    const closes: number[] = [];
    const gql = createClient({
      url: `${server.apiUrl.replace(/^http/, 'ws')}/graphql/ws`,
      connectionParams: { apiKey: key, authorization: `Bearer ${me.accessToken}` },
      retryAttempts: 0,
      lazy: false,
      on: { closed: (e) => closes.push((e as CloseEvent).code) },
      onNonLazyError: () => {},
    });
    let acked = false;
    gql.on('connected', () => (acked = true));
    await eventually(() => acked);
    const t0 = Date.now();
    await revokeSession(server.svc.sql, tokenService(server.svc), p.projectId, me.sessionId);
    await eventually(() => ws.closed() !== undefined && closes.length > 0, 1000);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(ws.closed()!.code).toBe(4403);
    expect(closes[0]).toBe(4403);
    await gql.dispose();
  });

  test("sendNotification reaches the customer's stream as notification.{type}", async () => {
    const me = await customer();
    const stream = sse(server.gatewayUrl, `notifications:${me.id}`, { apiKey: key, token: me.accessToken });
    try {
      await eventually(() => stream.isConnected());
      const sender = await p.key('sk', ['notifications:write']);
      const sent = await p.gql(
        sender,
        `mutation($c: ID!) { sendNotification(customerId: $c, type: "order.shipped", title: "Shipped", body: "On its way", data: { orderId: 42 }) { id } }`,
        { c: me.id },
      );
      expect(sent.body.errors).toBeUndefined();
      await eventually(() => stream.events.length === 1, 3000);
      expect(stream.events[0]).toMatchObject({
        channel: `notifications:${me.id}`,
        event: 'notification.order.shipped',
        data: {
          id: sent.body.data.sendNotification.id,
          type: 'order.shipped',
          title: 'Shipped',
          customerId: me.id,
          data: { orderId: 42 },
        },
      });
    } finally {
      stream.es.close();
    }
  });
});
