import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id logins and second processes are slow on a loaded box: never a reason to fail.
setDefaultTimeout(90_000);
import type { TestServer } from '../support/server.ts';
import { startGqlProject, type GqlProject } from '../graphql/helpers.ts';
import { upsertRole } from '../../src/identity/customer-roles.ts';
import { eventually } from '../support/eventually.ts';
import { spawnPeer } from './support.ts';
import { createClient } from 'graphql-ws';

let server: TestServer;
let p: GqlProject;
let pk: string;
let sk: string;

const AUTHENTICATED = [
  {
    type: 'condition',
    left: { type: 'field', path: 'authStatus' },
    operator: 'equals',
    right: { type: 'literal', value: 'authenticated' },
  },
];
const VIP = [{ type: 'segment', key: 'vip' }];

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    {
      key: 'banner',
      name: 'Banner',
      versioned: false,
      fields: [
        { key: 'title', type: 'text', queryable: true },
        { key: 'body', type: 'text' },
      ],
    },
    {
      key: 'order',
      name: 'Order',
      versioned: false,
      access: { read: ['self', 'service'] },
      fields: [{ key: 'item', type: 'text', access: { write: ['self', 'service'] } }],
    },
    {
      key: 'note',
      name: 'Note',
      versioned: false,
      fields: [
        { key: 'title', type: 'text' },
        { key: 'secret', type: 'text', access: { read: ['self'], write: ['self', 'service'] } },
        { key: 'order', type: 'reference', config: { modelKey: 'order' } },
      ],
    },
  ]));
  sk = await p.key('sk', [
    'records:read',
    'records:write',
    'records:publish',
    'records:delete',
    'drafts:read',
    'search:read',
    'customers:write',
  ]);
  await upsertRole(server.svc.sql, p.projectId, {
    key: 'member',
    name: 'Member',
    permissions: ['self:*', 'search:read'],
    isDefault: true,
  });
  // Segments as a push stores them; project.changed reloads the snapshot in every process.
  await server.svc.sql`insert into segments (project_id, key, position, is_active, definition) values
    (${p.projectId}, 'vip', 0, true, ${server.svc.sql.json({ key: 'vip', name: 'VIP', rules: { type: 'condition', left: { type: 'field', path: 'customer.totalSpent' }, operator: 'greater_than', right: { type: 'literal', value: 1000 } } })}),
    (${p.projectId}, 'off', 1, false, ${server.svc.sql.json({ key: 'off', name: 'Off', isActive: false, rules: { type: 'condition', left: { type: 'field', path: 'plan' }, operator: 'exists' } })})`;
  await server.svc.bus.publish({ type: 'project.changed', projectId: p.projectId });
  await eventually(() => server.svc.projects.peek(p.projectId)?.snapshot.segments.length === 1, 10_000);
}, 90_000);
afterAll(() => server.stop());

async function customer() {
  const e = `t${Math.random().toString(16).slice(2, 10)}@example.com`;
  const r = await p.gql(
    pk,
    `mutation($e: String!) { registerCustomer(email: $e, password: "targeting pw 1") { accessToken customer { id } } }`,
    { e },
  );
  expect(r.body.errors).toBeUndefined();
  return {
    id: r.body.data.registerCustomer.customer.id as string,
    auth: { authorization: `Bearer ${r.body.data.registerCustomer.accessToken}` },
  };
}

const BANNER = `query($id: ID!) { banner(_id: $id) { title body _context { authStatus segments variantId } } }`;

async function bannerWithVariants(): Promise<string> {
  const c = await p.gql(sk, `mutation { createBanner(data: { title: "Welcome", body: "all" }) { _id } }`);
  expect(c.body.errors).toBeUndefined();
  const id = c.body.data.createBanner._id;
  const vip = await p.gql(
    sk,
    `mutation($id: ID!, $r: JSON) { updateBanner(_id: $id, variantId: "vip", variantRules: $r, data: { title: "VIP" }) { title _context { variantId } } }`,
    { id, r: VIP },
  );
  expect(vip.body.errors).toBeUndefined();
  expect(vip.body.data.updateBanner).toEqual({ title: 'VIP', _context: { variantId: 'vip' } });
  const members = await p.gql(
    sk,
    `mutation($id: ID!, $r: JSON) { updateBanner(_id: $id, variantId: "members", variantRules: $r, data: { title: "Hello member" }) { title } }`,
    { id, r: AUTHENTICATED },
  );
  expect(members.body.errors).toBeUndefined();
  return id;
}

const setAttributes = (customerId: string, attributes: Record<string, unknown>) =>
  p.gql(
    sk,
    `mutation($c: ID!, $a: JSON!) { updateCustomerAttributes(customerId: $c, attributes: $a) { id attributes segments } }`,
    { c: customerId, a: attributes },
  );

describe('variants and targeting', () => {
  test('anonymous, authenticated and segment variants; the response cache keeps serving the anonymous one', async () => {
    const id = await bannerWithVariants();
    const anon = await p.gql(pk, BANNER, { id });
    expect(anon.body.data.banner).toEqual({
      title: 'Welcome',
      body: 'all',
      _context: { authStatus: '', segments: [], variantId: 'default' },
    });
    expect(anon.headers.get('cache-control')).toStartWith('public');
    const hits = server.svc.cacheStats.hits;
    expect((await p.gql(pk, BANNER, { id })).body.data.banner.title).toBe('Welcome');
    expect(server.svc.cacheStats.hits).toBe(hits + 1);

    const a = await customer();
    const asA = await p.gql(pk, BANNER, { id }, a.auth);
    // A variant is whole content: the variant started as a copy of the default, then its title changed.
    expect(asA.body.data.banner).toEqual({
      title: 'Hello member',
      body: 'all',
      _context: { authStatus: 'authenticated', segments: [], variantId: 'members' },
    });
    expect(asA.headers.get('cache-control')).toBe('private, no-store');

    // The project's server puts A in the vip segment: the first matching variant wins.
    const set = await setAttributes(a.id, { totalSpent: 5000, plan: 'gold' });
    expect(set.body.errors).toBeUndefined();
    expect(set.body.data.updateCustomerAttributes).toEqual({
      id: a.id,
      attributes: { totalSpent: 5000, plan: 'gold' },
      segments: ['vip'],
    });
    const vip = await p.gql(pk, BANNER, { id }, a.auth);
    expect(vip.body.data.banner).toEqual({
      title: 'VIP',
      body: 'all',
      _context: { authStatus: 'authenticated', segments: ['vip'], variantId: 'vip' },
    });
    const me = await p.gql(pk, '{ currentUser { id attributes segments } }', undefined, a.auth);
    expect(me.body.data.currentUser).toEqual({
      id: a.id,
      attributes: { totalSpent: 5000, plan: 'gold' },
      segments: ['vip'],
    });

    // Nothing of A's leaks: anonymous (cached) and another customer see their own variants.
    expect((await p.gql(pk, BANNER, { id })).body.data.banner.title).toBe('Welcome');
    const b = await customer();
    expect((await p.gql(pk, BANNER, { id }, b.auth)).body.data.banner._context).toEqual({
      authStatus: 'authenticated',
      segments: [],
      variantId: 'members',
    });
    // Lists choose per record too.
    const list = await p.gql(
      pk,
      `{ banners(where: { title: { eq: "Welcome" } }) { edges { node { _id title _context { variantId } } } } }`,
      undefined,
      a.auth,
    );
    expect(list.body.data.banners.edges.find((e: any) => e.node._id === id).node).toMatchObject({
      title: 'VIP',
      _context: { variantId: 'vip' },
    });

    // A null attribute removes it; dropping under the threshold leaves the segment.
    expect((await setAttributes(a.id, { totalSpent: 10, plan: null })).body.data.updateCustomerAttributes).toEqual({
      id: a.id,
      attributes: { totalSpent: 10 },
      segments: [],
    });
    expect((await p.gql(pk, BANNER, { id }, a.auth)).body.data.banner.title).toBe('Hello member');

    // The targeting context is worked out once per token and kept with it: a changed segment
    // definition (a push reloads the snapshot) must still show on that token's next read.
    await server.svc
      .sql`update segments set definition = ${server.svc.sql.json({ key: 'vip', name: 'VIP', rules: { type: 'condition', left: { type: 'field', path: 'customer.totalSpent' }, operator: 'greater_than', right: { type: 'literal', value: 5 } } })}
      where project_id = ${p.projectId} and key = 'vip'`;
    const before = server.svc.projects.peek(p.projectId)?.snapshot.segments;
    await server.svc.bus.publish({ type: 'project.changed', projectId: p.projectId });
    await eventually(() => server.svc.projects.peek(p.projectId)?.snapshot.segments !== before, 10_000);
    expect((await p.gql(pk, BANNER, { id }, a.auth)).body.data.banner._context).toEqual({
      authStatus: 'authenticated',
      segments: ['vip'],
      variantId: 'vip',
    });
    await server.svc
      .sql`update segments set definition = ${server.svc.sql.json({ key: 'vip', name: 'VIP', rules: { type: 'condition', left: { type: 'field', path: 'customer.totalSpent' }, operator: 'greater_than', right: { type: 'literal', value: 1000 } } })}
      where project_id = ${p.projectId} and key = 'vip'`;
    const after = server.svc.projects.peek(p.projectId)?.snapshot.segments;
    await server.svc.bus.publish({ type: 'project.changed', projectId: p.projectId });
    await eventually(() => server.svc.projects.peek(p.projectId)?.snapshot.segments !== after, 10_000);
    expect((await p.gql(pk, BANNER, { id }, a.auth)).body.data.banner.title).toBe('Hello member');
  });

  test('a secret key reads as a given context; variants are removed; history names the variant', async () => {
    const id = await bannerWithVariants();
    const q = `query($id: ID!, $c: ReadContextInput) { banner(_id: $id, context: $c) { title _context { authStatus segments variantId } } }`;
    expect((await p.gql(sk, q, { id, c: { segments: ['vip'] } })).body.data.banner).toEqual({
      title: 'VIP',
      _context: { authStatus: '', segments: ['vip'], variantId: 'vip' },
    });
    expect((await p.gql(sk, q, { id, c: { authStatus: 'authenticated' } })).body.data.banner.title).toBe(
      'Hello member',
    );
    expect((await p.gql(sk, q, { id, c: { variantId: 'members' } })).body.data.banner.title).toBe('Hello member');
    expect((await p.gql(sk, q, { id, c: { authStatus: 'anonymous' } })).body.errors[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', field: 'context.authStatus' },
    });
    // A public key cannot claim a context.
    const forged = await p.gql(pk, `query($id: ID!) { banner(_id: $id, context: { segments: ["vip"] }) { title } }`, {
      id,
    });
    expect(forged.body.errors[0].message).toContain('Unknown argument "context"');

    const history = await p.gql(sk, `query($id: ID!) { recordVersions(_id: $id) { action variantId } }`, { id });
    expect(history.body.data.recordVersions.map((v: any) => v.variantId)).toEqual(['default', 'vip', 'members']);

    const del = await p.gql(
      sk,
      `mutation($id: ID!) { deleteBannerVariant(_id: $id, variantId: "members") { title _context { variantId } } }`,
      { id },
    );
    expect(del.body.data.deleteBannerVariant).toEqual({ title: 'Welcome', _context: { variantId: 'default' } });
    const again = await p.gql(
      sk,
      `mutation($id: ID!) { deleteBannerVariant(_id: $id, variantId: "members") { title } }`,
      { id },
    );
    expect(again.body.errors[0].extensions.code).toBe('NOT_FOUND');
    const c = await customer();
    expect((await p.gql(pk, BANNER, { id }, c.auth)).body.data.banner._context.variantId).toBe('default');
  });

  test('bad variant input → BAD_USER_INPUT naming the field, and nothing is written', async () => {
    const id = (await p.gql(sk, `mutation { createBanner(data: { title: "Plain" }) { _id } }`)).body.data.createBanner
      ._id;
    const bad = async (args: string, vars: Record<string, unknown>, field: string) => {
      const r = await p.gql(
        sk,
        `mutation($id: ID!${'r' in vars ? ', $r: JSON' : ''}) { updateBanner(_id: $id, ${args}, data: { title: "x" }) { title } }`,
        { id, ...vars },
      );
      expect(r.body.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', field } });
    };
    await bad('variantId: "no spaces"', {}, 'variantId');
    await bad('variantRules: $r', { r: AUTHENTICATED }, 'variantRules');
    await bad(
      'variantId: "v", variantRules: $r',
      { r: [{ type: 'condition', left: { type: 'field', path: 'authStatus' }, operator: 'like' }] },
      'variantRules',
    );
    await bad('variantId: "v", variantRules: $r', { r: [{ type: 'nor', rules: [] }] }, 'variantRules');
    await bad(
      'variantId: "v", variantRules: $r',
      {
        r: [
          {
            type: 'condition',
            left: { type: 'field', path: 'segments' },
            operator: 'in',
            right: { type: 'literal', value: 'vip' },
          },
        ],
      },
      'variantRules',
    );
    const [row] = await server.svc.sql<
      { variants: unknown; data: { title: string } }[]
    >`select variants, data from record_content where record_id = ${id} and stage = 'draft'`;
    expect(row).toEqual({ variants: null, data: { title: 'Plain' } });

    const attrs = await p.gql(
      sk,
      `mutation($c: ID!) { updateCustomerAttributes(customerId: $c, attributes: [1, 2]) { id } }`,
      { c: (await customer()).id },
    );
    expect(attrs.body.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', field: 'attributes' } });
    const unknown = await p.gql(
      sk,
      `mutation { updateCustomerAttributes(customerId: "cus_nobody", attributes: {}) { id } }`,
    );
    expect(unknown.body.errors[0].extensions.code).toBe('NOT_FOUND');
    const noScope = await p.gql(
      await p.key('sk', ['records:read']),
      `mutation { updateCustomerAttributes(customerId: "x", attributes: {}) { id } }`,
    );
    expect(noScope.body.errors[0].message).toBe('missing required scope: customers:write');
    const publicKey = await p.gql(pk, `mutation { updateCustomerAttributes(customerId: "x", attributes: {}) { id } }`);
    expect(publicKey.body.errors[0].message).toStartWith('Cannot query field "updateCustomerAttributes"');
  });
});

describe('self read access', () => {
  test('owner-only models: lists, single reads, generic reads, search and links show a customer their own records only', async () => {
    const a = await customer();
    const b = await customer();
    const mk = async (who: { auth: Record<string, string> }, item: string) => {
      const r = await p.gql(
        pk,
        `mutation($i: String!) { createOrder(data: { item: $i }) { _id item } }`,
        { i: item },
        who.auth,
      );
      expect(r.body.errors).toBeUndefined();
      return r.body.data.createOrder._id as string;
    };
    const oa = await mk(a, 'apples for a');
    const ob = await mk(b, 'bananas for b');
    const ids = (r: any) => r.body.data.orders.edges.map((e: any) => e.node._id).sort();
    const LIST = '{ orders(first: 100) { totalCount edges { node { _id item } } } }';
    expect(ids(await p.gql(pk, LIST, undefined, a.auth))).toEqual([oa]);
    expect((await p.gql(pk, LIST, undefined, a.auth)).body.data.orders.totalCount).toBe(1);
    expect(ids(await p.gql(pk, LIST, undefined, b.auth))).toEqual([ob]);
    // Key alone: nobody's orders (public is not on the model's access list); the service reads all.
    expect((await p.gql(pk, LIST)).body.data.orders.totalCount).toBe(0);
    expect(ids(await p.gql(sk, LIST))).toEqual(expect.arrayContaining([oa, ob]));

    const one = `query($id: ID!) { order(_id: $id) { item } record(_id: $id) { _id } }`;
    expect((await p.gql(pk, one, { id: ob }, a.auth)).body.data).toEqual({ order: null, record: null });
    expect((await p.gql(pk, one, { id: oa }, a.auth)).body.data).toEqual({
      order: { item: 'apples for a' },
      record: { _id: oa },
    });
    const search = await p.gql(
      pk,
      `{ searchOrders(query: "for") { edges { node { _id } } } searchRecords(query: "for") { edges { node { _id } } } }`,
      undefined,
      a.auth,
    );
    expect(search.body.errors).toBeUndefined();
    expect(search.body.data.searchOrders.edges.map((e: any) => e.node._id)).toEqual([oa]);
    expect(search.body.data.searchRecords.edges.map((e: any) => e.node._id)).toEqual([oa]);

    // A public note linking to B's order: the link resolves for B only.
    const note = (
      await p.gql(sk, `mutation($o: ID!) { createNote(data: { title: "n", order: $o }) { _id } }`, { o: ob })
    ).body.data.createNote._id;
    const link = `query($id: ID!) { note(_id: $id) { order { _id item } } }`;
    expect((await p.gql(pk, link, { id: note }, a.auth)).body.data.note.order).toBeNull();
    expect((await p.gql(pk, link, { id: note }, b.auth)).body.data.note.order).toEqual({
      _id: ob,
      item: 'bananas for b',
    });
    expect((await p.gql(pk, link, { id: note })).body.data.note.order).toBeNull();
  });

  test('change channels of an owner-only model are refused to readers who may not read all of it (changes:* leaves the model out)', async () => {
    const a = await customer();
    const token = a.auth.authorization.slice('Bearer '.length);
    const at = (channel: string, q: string) =>
      fetch(`${server.gatewayUrl}/sse/${channel}?${q}`, { signal: AbortSignal.timeout(10_000) });
    for (const [channel, q] of [
      ['changes:order', `apiKey=${pk}&token=${token}`],
      ['changes:order', `token=${token}`],
    ] as const) {
      const res = await at(channel, q);
      expect({ channel, q: q.replace(/=[^&]+/g, ''), status: res.status }).toEqual({
        channel,
        q: q.replace(/=[^&]+/g, ''),
        status: 403,
      });
      await res.body?.cancel();
    }
    // The service (a secret key on the model's access list) still hears every order, and others' channels are unaffected.
    for (const [channel, key] of [
      ['changes:order', sk],
      ['changes:banner', pk],
    ] as const) {
      const res = await at(channel, `apiKey=${key}`);
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
    // GraphQL subscriptions (graphql-ws) refuse it the same way; another model subscribes.
    const client = createClient({
      url: `${server.apiUrl.replace(/^http/, 'ws')}/graphql/ws`,
      connectionParams: { apiKey: pk, authorization: a.auth.authorization },
      retryAttempts: 0,
      lazy: false,
      onNonLazyError: () => {},
    });
    try {
      const first = (query: string) =>
        new Promise<{ errors?: { message: string; extensions?: { code?: string } }[] } | string>((resolve) => {
          const stop = client.subscribe(
            { query },
            {
              next: (v) => (resolve(v as never), stop()),
              error: (e) => resolve(Array.isArray(e) ? { errors: e } : String(e)),
              complete: () => resolve('complete'),
            },
          );
          setTimeout(() => (resolve('subscribed'), stop()), 1500);
        });
      expect(await first('subscription { recordChanged(modelKey: "order") { recordId } }')).toMatchObject({
        errors: [{ message: 'Insufficient permissions' }],
      });
      expect(await first('subscription { recordChanged(modelKey: "banner") { recordId } }')).toBe('subscribed');
    } finally {
      await client.dispose();
    }
  });

  test('self-readable fields: the owner reads them; another customer, the key alone and content JSON do not', async () => {
    const a = await customer();
    const b = await customer();
    const c = await p.gql(
      pk,
      `mutation { createNote(data: { title: "mine", secret: "s3cret" }) { _id secret } }`,
      undefined,
      a.auth,
    );
    expect(c.body.errors).toBeUndefined();
    const id = c.body.data.createNote._id;
    const q = `query($id: ID!) { note(_id: $id) { title secret content } notes(first: 100) { edges { node { _id secret } } } }`;
    const mine = await p.gql(pk, q, { id }, a.auth);
    expect(mine.body.data.note).toEqual({
      title: 'mine',
      secret: 's3cret',
      content: { title: 'mine', secret: 's3cret' },
    });
    expect(mine.body.data.notes.edges.find((e: any) => e.node._id === id).node.secret).toBe('s3cret');
    for (const who of [b.auth, {}]) {
      const theirs = await p.gql(pk, q, { id }, who);
      expect(theirs.body.data.note).toEqual({ title: 'mine', secret: null, content: { title: 'mine' } });
      expect(theirs.body.data.notes.edges.find((e: any) => e.node._id === id).node.secret).toBeNull();
    }
  });
});

describe('two processes on one database', () => {
  test('the peer resolves the same variants, hears attribute changes on the bus, and keeps owner-only rows private', async () => {
    const id = await bannerWithVariants();
    const peer = await spawnPeer(server);
    try {
      const gqlAt = async (
        url: string,
        key: string,
        query: string,
        variables?: Record<string, unknown>,
        headers: Record<string, string> = {},
      ) => {
        const res = await fetch(`${url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
          body: JSON.stringify({ query, variables }),
        });
        return { body: (await res.json()) as any, headers: res.headers };
      };
      const a = await customer();
      // The peer reads A's profile once (no segments) and caches it.
      expect((await gqlAt(peer.apiUrl, pk, BANNER, { id }, a.auth)).body.data.banner._context).toEqual({
        authStatus: 'authenticated',
        segments: [],
        variantId: 'members',
      });
      expect((await gqlAt(peer.apiUrl, pk, BANNER, { id })).body.data.banner.title).toBe('Welcome');
      // Set here; the peer hears customer.changed and re-reads the profile.
      expect((await setAttributes(a.id, { totalSpent: 2000 })).body.errors).toBeUndefined();
      let title = '';
      for (const end = Date.now() + 15_000; title !== 'VIP' && Date.now() < end; await Bun.sleep(50)) {
        title = (await gqlAt(peer.apiUrl, pk, BANNER, { id }, a.auth)).body.data.banner.title;
      }
      expect(title).toBe('VIP');
      // The peer's anonymous answer is still the default.
      const anon = await gqlAt(peer.apiUrl, pk, BANNER, { id });
      expect(anon.body.data.banner.title).toBe('Welcome');
      expect(anon.headers.get('cache-control')).toStartWith('public');

      // A variant written on the peer shows here.
      const w = await gqlAt(
        peer.apiUrl,
        sk,
        `mutation($id: ID!, $r: JSON) { updateBanner(_id: $id, variantId: "vip", variantRules: $r, data: { body: "from the peer" }) { body } }`,
        { id, r: VIP },
      );
      expect(w.body.errors).toBeUndefined();
      expect((await p.gql(pk, BANNER, { id }, a.auth)).body.data.banner).toMatchObject({
        title: 'VIP',
        body: 'from the peer',
      });

      // Owner-only rows: an order created here is A's alone on the peer too.
      const o = (await p.gql(pk, `mutation { createOrder(data: { item: "peer check" }) { _id } }`, undefined, a.auth))
        .body.data.createOrder._id;
      const b = await customer();
      const one = `query($id: ID!) { order(_id: $id) { item } }`;
      expect((await gqlAt(peer.apiUrl, pk, one, { id: o }, a.auth)).body.data.order).toEqual({ item: 'peer check' });
      expect((await gqlAt(peer.apiUrl, pk, one, { id: o }, b.auth)).body.data.order).toBeNull();
    } finally {
      await peer.stop();
    }
  });
});
