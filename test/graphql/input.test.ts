import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from './helpers.ts';

/** Issue 10 rows 4 and 6: bad input is BAD_USER_INPUT naming the argument, never a server fault. */
let server: TestServer;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  ({ server, p, sk } = await startSecretProject([
    {
      key: 'post',
      name: 'Post',
      fields: [
        { key: 'title', type: 'text', queryable: true },
        { key: 'price', type: 'number', queryable: true },
        { key: 'meta', type: 'json' },
      ],
    },
  ]));
  for (let i = 0; i < 3; i++) {
    const r = await p.gql(sk, `mutation($d: PostInput!) { createPost(data: $d) { _id } }`, {
      d: { title: `t${i}`, price: i },
    });
    await p.gql(sk, `mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }`, { id: r.body.data.createPost._id });
  }
});
afterAll(() => server.stop());

/** The request failed on the client's input, naming `argument`; nothing was masked as a fault. */
function badInput(r: { status: number; body: any }, argument: string): void {
  expect(r.status === 200 || r.status === 400).toBe(true);
  expect(r.body.data?.[Object.keys(r.body.data ?? {})[0] ?? ''] ?? null).toBeNull();
  const e = r.body.errors?.[0];
  expect(e?.extensions?.code).toBe('BAD_USER_INPUT');
  expect(e.extensions.field).toBe(argument);
}

const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

function nested(depth: number, leaf: unknown, wrap: (x: unknown) => unknown): unknown {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = wrap(v);
  return v;
}

describe('row 4: strings PostgreSQL cannot store', () => {
  const NUL = 'a\u0000b';
  const LONE = 'a\ud800b';

  test('NUL bytes and lone surrogates in a text field, through variables', async () => {
    for (const s of [NUL, LONE]) {
      badInput(
        await p.gql(sk, `mutation($d: PostInput!) { createPost(data: $d) { _id } }`, { d: { title: s } }),
        'data',
      );
    }
  });

  test('NUL bytes written as a literal escape in the document', async () => {
    badInput(await p.gql(sk, `mutation { createPost(data: { title: "a\\u0000b" }) { _id } }`), 'data');
    badInput(await p.gql(sk, `{ posts(where: { title: { contains: "\\u0000" } }) { totalCount } }`), 'where');
  });

  test('naturalKey, where, search and JSON values and keys', async () => {
    badInput(
      await p.gql(sk, `mutation($k: String) { createPost(naturalKey: $k, data: { title: "x" }) { _id } }`, { k: NUL }),
      'naturalKey',
    );
    badInput(
      await p.gql(sk, `query($w: PostWhere) { posts(where: $w) { totalCount } }`, { w: { title: { eq: NUL } } }),
      'where',
    );
    badInput(await p.gql(sk, `query($q: String!) { searchPosts(query: $q) { totalCount } }`, { q: LONE }), 'query');
    badInput(
      await p.gql(sk, `mutation($m: JSON) { createPost(data: { title: "x", meta: $m }) { _id } }`, {
        m: { deep: [NUL] },
      }),
      'data',
    );
    badInput(
      await p.gql(sk, `mutation($m: JSON) { createPost(data: { title: "x", meta: $m }) { _id } }`, { m: { [NUL]: 1 } }),
      'data',
    );
    badInput(await p.gql(sk, `query($id: ID!) { post(_id: $id) { _id } }`, { id: NUL }), '_id');
  });
});

describe('row 4: forged pagination cursors', () => {
  const list = `query($after: String) { posts(first: 1, after: $after, orderBy: [{ field: price }]) { edges { node { title } } } }`;
  const search = `query($after: String) { searchPosts(query: "t1", after: $after) { totalCount } }`;

  test('a real cursor still pages', async () => {
    const first = await p.gql(sk, `{ posts(first: 1, orderBy: [{ field: price }]) { pageInfo { endCursor } } }`);
    const next = await p.gql(sk, list, { after: first.body.data.posts.pageInfo.endCursor });
    expect(next.body.errors).toBeUndefined();
    expect(next.body.data.posts.edges[0].node.title).toBe('t1');
  });

  test('list cursors of the wrong shape, type or value', async () => {
    for (const after of [
      cursor([{ a: 1 }, 'rec_1']),
      cursor(['abc', 'rec_1']),
      cursor([1, 2]),
      cursor(['1']),
      cursor('x'),
      cursor(['1', { id: 1 }]),
      cursor(['1e999999', 'rec_1']),
      cursor(['1', 'a\u0000']),
      'not base64 !!',
      'A'.repeat(5000),
    ]) {
      badInput(await p.gql(sk, list, { after }), 'after');
    }
  });

  test('search cursors with a huge, negative or non-integer offset', async () => {
    for (const after of [
      cursor(['s', 1e300]),
      cursor(['s', -5]),
      cursor(['s', 1.5]),
      cursor(['s', '3']),
      cursor(['s', 100_000_000]),
      cursor({ s: 1 }),
    ]) {
      badInput(await p.gql(sk, search, { after }), 'after');
    }
  });
});

describe('row 4: very deep or very wide input', () => {
  test('where trees thousands of levels deep', async () => {
    const where = nested(3000, { title: { eq: 'x' } }, (w) => ({ NOT: w }));
    badInput(await p.gql(sk, `query($w: PostWhere) { posts(where: $w) { totalCount } }`, { w: where }), 'where');
    const and = nested(40, { title: { eq: 'x' } }, (w) => ({ AND: [w] }));
    badInput(await p.gql(sk, `query($w: PostWhere) { posts(where: $w) { totalCount } }`, { w: and }), 'where');
  });

  test('where trees tens of thousands of branches or values wide', async () => {
    const or = { OR: Array.from({ length: 20_000 }, (_, i) => ({ price: { eq: i } })) };
    badInput(await p.gql(sk, `query($w: PostWhere) { posts(where: $w) { totalCount } }`, { w: or }), 'where');
    const many = { title: { in: Array.from({ length: 30_000 }, (_, i) => `v${i}`) } };
    badInput(await p.gql(sk, `query($w: PostWhere) { posts(where: $w) { totalCount } }`, { w: many }), 'where');
  });

  // Found by the fuzz suite: 20,000 sort keys reached PostgreSQL ("target lists can have at most 1664 entries").
  test('an orderBy with thousands of keys', async () => {
    const orderBy = Array.from({ length: 20_000 }, () => ({ field: 'price', direction: 'ASC' }));
    badInput(
      await p.gql(sk, `query($o: [PostOrderBy!]) { posts(orderBy: $o) { totalCount } }`, { o: orderBy }),
      'orderBy',
    );
    const ok = await p.gql(
      sk,
      `query($o: [PostOrderBy!]) { posts(orderBy: $o, first: 1) { edges { node { title } } } }`,
      { o: [{ field: 'price', direction: 'DESC' }, { field: 'title' }] },
    );
    expect(ok.body.data.posts.edges[0].node.title).toBe('t2');
  });

  test('a where within the limits still filters', async () => {
    const ok = { OR: Array.from({ length: 200 }, (_, i) => ({ price: { eq: i } })), NOT: { title: { eq: 't0' } } };
    const r = await p.gql(sk, `query($w: PostWhere) { posts(where: $w) { totalCount } }`, { w: ok });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.posts.totalCount).toBe(2);
  });

  test('JSON values nested thousands deep, as variables and as literals', async () => {
    const deep = nested(5000, 1, (x) => [x]);
    badInput(
      await p.gql(sk, `mutation($m: JSON) { createPost(data: { title: "x", meta: $m }) { _id } }`, { m: deep }),
      'data',
    );
    const literal = `${'['.repeat(2000)}1${']'.repeat(2000)}`;
    badInput(await p.gql(sk, `mutation { createPost(data: { title: "x", meta: ${literal} }) { _id } }`), 'data');
    const shallow = nested(20, { ok: true }, (x) => ({ x }));
    const r = await p.gql(sk, `mutation($m: JSON) { createPost(data: { title: "deep-ok", meta: $m }) { meta } }`, {
      m: shallow,
    });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.createPost.meta).toEqual(shallow);
  });
});

describe('row 6: locales on writes', () => {
  test('a malformed locale is refused on create, update and batch writes, as on reads', async () => {
    badInput(
      await p.gql(sk, `mutation { createPost(locale: "not a locale", data: { title: "x" }) { _id } }`),
      'locale',
    );
    const created = await p.gql(sk, `mutation { createPost(data: { title: "loc" }) { _id } }`);
    const id = created.body.data.createPost._id;
    badInput(
      await p.gql(sk, `mutation($id: ID!) { updatePost(_id: $id, locale: "x'; drop", data: { title: "y" }) { _id } }`, {
        id,
      }),
      'locale',
    );
    badInput(
      await p.gql(
        sk,
        `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`,
        { ops: [{ action: 'UPDATE', _id: id, locale: '??', data: { title: 'z' } }] },
      ),
      'operations.0.locale',
    );
    badInput(await p.gql(sk, `query($id: ID!) { post(_id: $id, locale: "??") { _id } }`, { id }), 'locale');
    // A well-formed locale writes and reads back.
    const de = await p.gql(
      sk,
      `mutation($id: ID!) { updatePost(_id: $id, locale: "de-AT", data: { title: "Servus" }) { title } }`,
      { id },
    );
    expect(de.body.errors).toBeUndefined();
    const back = await p.gql(sk, `query($id: ID!) { post(_id: $id, locale: "de-AT", preview: true) { title } }`, {
      id,
    });
    expect(back.body.data.post.title).toBe('Servus');
  });

  test('with configured locales, writes and reads outside them are refused', async () => {
    await server.svc
      .sql`update projects set settings = settings || ${server.svc.sql.json({ locales: ['en', 'de'] } as never)} where id = ${p.projectId}`;
    await (await server.svc.projects.get(p.projectId)).reload();
    try {
      badInput(await p.gql(sk, `mutation { createPost(locale: "fr", data: { title: "bonjour" }) { _id } }`), 'locale');
      badInput(await p.gql(sk, `{ posts(locale: "fr") { totalCount } }`), 'locale');
      const ok = await p.gql(sk, `mutation { createPost(locale: "de", data: { title: "hallo" }) { _id } }`);
      expect(ok.body.errors).toBeUndefined();
    } finally {
      await server.svc.sql`update projects set settings = settings - 'locales' where id = ${p.projectId}`;
      await (await server.svc.projects.get(p.projectId)).reload();
    }
  });
});
