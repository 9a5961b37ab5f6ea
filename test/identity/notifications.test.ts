import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id logins and second processes are slow on a loaded box: never a reason to fail.
setDefaultTimeout(60_000);
import type { TestServer } from '../support/server.ts';
import { gqlProject, startProject, type GqlProject } from '../graphql/helpers.ts';
import { upsertRole } from '../../src/identity/customer-roles.ts';
import { listOutbox } from '../../src/identity/mailer.ts';
import type { BusEvent } from '../../src/bus/bus.ts';
import { eventually } from '../support/eventually.ts';
import { spawnPeer } from './support.ts';

let server: TestServer;
let p: GqlProject;
let pk: string;
let sk: string;

beforeAll(async () => {
  ({ server, p } = await startProject([{ key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] }]));
  pk = await p.key('pk', ['records:read']);
  sk = await p.key('sk', ['records:read', 'notifications:write']);
  await upsertRole(server.svc.sql, p.projectId, {
    key: 'member',
    name: 'Member',
    permissions: ['notifications:read', 'notifications:write'],
    isDefault: true,
  });
}, 60_000);
afterAll(() => server.stop());

const SEND = `mutation($c: ID!, $t: String!, $d: JSON) { sendNotification(customerId: $c, type: $t, title: "Shipped", body: "Your order left", data: $d) { id type title read } }`;
const LIST = `query($u: Boolean) { notifications(first: 10, unreadOnly: $u) { id type title body data read } }`;

async function customer() {
  const e = `n${Math.random().toString(16).slice(2, 10)}@example.com`;
  const r = await p.gql(
    pk,
    `mutation($e: String!) { registerCustomer(email: $e, password: "notify me pw") { accessToken customer { id } } }`,
    { e },
  );
  return {
    email: e,
    id: r.body.data.registerCustomer.customer.id as string,
    auth: { authorization: `Bearer ${r.body.data.registerCustomer.accessToken}` },
  };
}

describe('notifications', () => {
  test('a server sends; the bus announces notification.{type} for the customer; the customer lists and marks read', async () => {
    const a = await customer();
    const heard: BusEvent[] = [];
    const off = server.svc.bus.subscribe((e) => e.type === 'notification.created' && heard.push(e));
    const sent = await p.gql(sk, SEND, { c: a.id, t: 'order.shipped', d: { orderId: 42 } });
    off();
    expect(sent.body.errors).toBeUndefined();
    expect(sent.body.data.sendNotification).toMatchObject({ type: 'order.shipped', title: 'Shipped', read: false });
    expect(heard).toEqual([
      expect.objectContaining({ projectId: p.projectId, customerId: a.id, kind: 'order.shipped' }),
    ]);

    const list = await p.gql(pk, LIST, { u: true }, a.auth);
    expect(list.body.data.notifications).toEqual([
      {
        id: sent.body.data.sendNotification.id,
        type: 'order.shipped',
        title: 'Shipped',
        body: 'Your order left',
        data: { orderId: 42 },
        read: false,
      },
    ]);
    const marked = await p.gql(
      pk,
      `mutation($id: ID!) { markNotificationRead(id: $id) { read } }`,
      { id: sent.body.data.sendNotification.id },
      a.auth,
    );
    expect(marked.body.data.markNotificationRead.read).toBe(true);
    expect((await p.gql(pk, LIST, { u: true }, a.auth)).body.data.notifications).toEqual([]);

    // Another customer neither sees nor marks it.
    const b = await customer();
    expect((await p.gql(pk, LIST, {}, b.auth)).body.data.notifications).toEqual([]);
    const steal = await p.gql(
      pk,
      `mutation($id: ID!) { markNotificationRead(id: $id) { read } }`,
      { id: sent.body.data.sendNotification.id },
      b.auth,
    );
    expect(steal.body.errors[0].extensions.code).toBe('NOT_FOUND');
  });

  test('preferences: a disabled type is not stored; mail follows the email switch and the unsubscribe list', async () => {
    const a = await customer();
    const mails = () => listOutbox(server.dataDir, { to: a.email }).filter((m) => m.list === 'notifications');
    await p.gql(sk, SEND, { c: a.id, t: 'order.shipped' });
    expect(mails()).toHaveLength(1);

    const prefs = await p.gql(
      pk,
      `mutation { updateNotificationPreferences(disabledTypes: ["promo"], email: false) { disabledTypes email } }`,
      undefined,
      a.auth,
    );
    expect(prefs.body.data.updateNotificationPreferences).toEqual({ disabledTypes: ['promo'], email: false });
    expect(
      (await p.gql(pk, '{ notificationPreferences { disabledTypes email } }', undefined, a.auth)).body.data
        .notificationPreferences,
    ).toEqual({ disabledTypes: ['promo'], email: false });
    expect((await p.gql(sk, SEND, { c: a.id, t: 'promo' })).body.data.sendNotification).toBeNull();
    await p.gql(sk, SEND, { c: a.id, t: 'order.shipped' });
    expect(mails()).toHaveLength(1);
    expect((await p.gql(pk, LIST, {}, a.auth)).body.data.notifications.map((n: { type: string }) => n.type)).toEqual([
      'order.shipped',
      'order.shipped',
    ]);

    await p.gql(pk, `mutation { updateNotificationPreferences(email: true) { email } }`, undefined, a.auth);
    const link = new URL(/^<(.+)>$/.exec(mails()[0]!.headers['List-Unsubscribe']!)![1]!);
    expect((await fetch(`${server.apiUrl}${link.pathname}${link.search}`, { method: 'POST' })).status).toBe(200);
    await p.gql(sk, SEND, { c: a.id, t: 'order.shipped' });
    expect(mails()).toHaveLength(1);
  });

  test('two processes: sent on one, announced on the bus of the other, listed and marked there', async () => {
    const a = await customer();
    const peer = await spawnPeer(server);
    try {
      const heard: BusEvent[] = [];
      const off = server.svc.bus.subscribe(
        (e) => e.type === 'notification.created' && e.customerId === a.id && heard.push(e),
      );
      const res = await fetch(`${peer.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': sk },
        body: JSON.stringify({ query: SEND, variables: { c: a.id, t: 'order.packed' } }),
      });
      const sent = ((await res.json()) as any).data.sendNotification;
      expect(sent).toMatchObject({ type: 'order.packed', read: false });
      // The realtime channel of this process hears what the peer sent.
      await eventually(() => heard.length === 1, 15_000);
      off();
      expect(heard[0]).toMatchObject({ projectId: p.projectId, customerId: a.id, kind: 'order.packed' });
      expect(
        (await p.gql(pk, LIST, { u: true }, a.auth)).body.data.notifications.map((n: { id: string }) => n.id),
      ).toEqual([sent.id]);
      const mark = await fetch(`${peer.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': pk, ...a.auth },
        body: JSON.stringify({
          query: `mutation($id: ID!) { markNotificationRead(id: $id) { read } }`,
          variables: { id: sent.id },
        }),
      });
      expect(((await mark.json()) as any).data.markNotificationRead.read).toBe(true);
      expect((await p.gql(pk, LIST, { u: true }, a.auth)).body.data.notifications).toEqual([]);
    } finally {
      await peer.stop();
    }
  });

  test('who may do what', async () => {
    const a = await customer();
    const pub = await p.gql(pk, SEND, { c: a.id, t: 'x' }, a.auth);
    expect(pub.body.errors[0].message).toStartWith('Cannot query field "sendNotification"');
    expect((await p.gql(pk, LIST, {})).body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const unknown = await p.gql(sk, SEND, { c: 'cus_nobody', t: 'x' });
    expect(unknown.body.errors[0].extensions.code).toBe('NOT_FOUND');
    const other = await gqlProject(
      server,
      [{ key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] }],
      'other',
    );
    const otherSk = await other.key('sk', ['notifications:write']);
    expect((await other.gql(otherSk, SEND, { c: a.id, t: 'x' })).body.errors[0].extensions.code).toBe('NOT_FOUND');
    const bad = await p.gql(sk, SEND, { c: a.id, t: 'has spaces' });
    expect(bad.body.errors[0].extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'type' });
  });
});
