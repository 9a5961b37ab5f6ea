import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startKeyedProject, type GqlProject } from './helpers.ts';
import { observeQueries } from '../../src/content/db.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;

beforeAll(async () => {
  ({ server, p, sk, pk } = await startKeyedProject([
    { key: 'author', name: 'Author', fields: [{ key: 'name', type: 'text' }] },
    { key: 'tag', name: 'Tag', fields: [{ key: 'label', type: 'text' }] },
    {
      key: 'post',
      name: 'Post',
      fields: [
        { key: 'title', type: 'text', queryable: true },
        { key: 'author', type: 'reference', config: { modelKey: 'author' } },
        { key: 'tags', type: 'select', config: { optionModelKey: 'tag', multiple: true } },
      ],
    },
  ]));
});
afterAll(() => server.stop());

async function publishAll(ids: string[]) {
  const ops = ids.map((_id) => ({ action: 'PUBLISH', _id }));
  const r = await p.gql(
    sk,
    `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`,
    { ops },
  );
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
}

describe('no N+1', () => {
  test('references and selects over a page cost one query per field, not per record', async () => {
    const ids: string[] = [];
    const tags: string[] = [];
    for (let i = 0; i < 3; i++)
      tags.push((await p.gql(sk, `mutation { createTag(data: { label: "t${i}" }) { _id } }`)).body.data.createTag._id);
    for (let i = 0; i < 10; i++) {
      const a = await p.gql(sk, `mutation($n: String) { createAuthor(data: { name: $n }) { _id } }`, { n: `a${i}` });
      const post = await p.gql(sk, `mutation($d: PostInput!) { createPost(data: $d) { _id } }`, {
        d: { title: `p${i}`, author: a.body.data.createAuthor._id, tags },
      });
      ids.push(a.body.data.createAuthor._id, post.body.data.createPost._id);
    }
    await publishAll([...ids, ...tags]);
    const seen: string[] = [];
    observeQueries((q) => seen.push(q));
    const r = await p.gql(pk, `{ posts(first: 10) { edges { node { title author { name } tags { label } } } } }`);
    observeQueries(undefined);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.posts.edges).toHaveLength(10);
    expect(r.body.data.posts.edges[3].node).toEqual({
      title: 'p3',
      author: { name: 'a3' },
      tags: [{ label: 't0' }, { label: 't1' }, { label: 't2' }],
    });
    // One list query plus one batched by-id query for the authors and tags of the whole page.
    expect(seen.length).toBeLessThanOrEqual(2);
  });
});

describe('response cache', () => {
  test('a repeated published read is served without touching PostgreSQL, and a publish is visible on the next read', async () => {
    const c = await p.gql(sk, `mutation { createPost(naturalKey: "cached", data: { title: "one" }) { _id } }`);
    const id = c.body.data.createPost._id;
    await publishAll([id]);
    const q = `{ post(naturalKey: "cached") { title } }`;
    expect((await p.gql(pk, q)).body.data.post.title).toBe('one');
    const seen: string[] = [];
    observeQueries((s) => seen.push(s));
    expect((await p.gql(pk, q)).body.data.post.title).toBe('one');
    expect(seen).toHaveLength(0);
    observeQueries(undefined);
    await p.gql(sk, `mutation($id: ID!) { updatePost(_id: $id, data: { title: "two" }) { _id } }`, { id });
    await publishAll([id]);
    expect((await p.gql(pk, q)).body.data.post.title).toBe('two');
  });

  test('preview responses are never cached and carry no-store', async () => {
    const q = `{ post(naturalKey: "cached", preview: true) { title } }`;
    const r = await p.gql(sk, q);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const seen: string[] = [];
    observeQueries((s) => seen.push(s));
    await p.gql(sk, q);
    observeQueries(undefined);
    expect(seen.length).toBe(1);
  });

  test('a customer token that does not verify is refused, never answered from the cache (valid ones: test/identity)', async () => {
    const r = await p.gql(pk, `{ post(naturalKey: "cached") { title } }`, undefined, { authorization: 'Bearer x' });
    expect(r.status).toBe(401);
    expect(r.body.errors[0].message).toBe('Invalid or expired token');
    expect(r.headers.get('cache-control')).toBe('no-store');
  });
});

describe('batch', () => {
  test('all or nothing: a failing operation rolls back the earlier ones', async () => {
    const before = await p.gql(sk, `{ posts(preview: true) { totalCount } }`);
    const r = await p.gql(
      sk,
      `mutation { batchRecordOperations(operations: [
      { action: CREATE, modelKey: "post", naturalKey: "b1", data: { title: "b1" } },
      { action: CREATE, modelKey: "post", naturalKey: "b1", data: { title: "dup" } }
    ]) { _id } }`,
    );
    expect(r.body.errors[0].extensions.code).toBe('CONFLICT');
    const after = await p.gql(sk, `{ posts(preview: true) { totalCount } }`);
    expect(after.body.data.posts.totalCount).toBe(before.body.data.posts.totalCount);
    const ok = await p.gql(
      sk,
      `mutation { batchRecordOperations(operations: [
      { action: CREATE, modelKey: "post", naturalKey: "b1", data: { title: "b1" } },
      { action: CREATE, modelKey: "post", naturalKey: "b2", data: { title: "b2" } }
    ]) { action _id record { _id ... on Post { title } } } }`,
    );
    expect(ok.body.data.batchRecordOperations.map((x: any) => x.record.title)).toEqual(['b1', 'b2']);
  });
});

describe('per-key pruning', () => {
  test('public keys have no mutations', async () => {
    const r = await p.gql(pk, `mutation { createPost(data: { title: "x" }) { _id } }`);
    expect(r.body.errors[0].message).toMatch(/^Cannot query field|Schema is not configured for mutations/);
  });

  test('model-restricted keys see only their models and no generic fields', async () => {
    const k = await p.key('sk', ['records:read'], ['post']);
    expect((await p.gql(k, `{ author(_id: "x") { _id } }`)).body.errors[0].message).toStartWith('Cannot query field');
    expect((await p.gql(k, `{ record(_id: "x") { _id } }`)).body.errors[0].message).toStartWith('Cannot query field');
    expect((await p.gql(k, `{ posts { totalCount } }`)).body.errors).toBeUndefined();
  });

  test('_hasDraft exists only for keys holding drafts:read', async () => {
    expect((await p.gql(pk, `{ posts { edges { node { _hasDraft } } } }`)).body.errors[0].message).toStartWith(
      'Cannot query field',
    );
    expect((await p.gql(sk, `{ posts { edges { node { _hasDraft } } } }`)).body.errors).toBeUndefined();
  });

  test('a secret key without records:write gets the scope message with no code', async () => {
    const k = await p.key('sk', ['records:read']);
    const r = await p.gql(k, `mutation { createPost(data: { title: "x" }) { _id } }`);
    expect(r.body.errors[0]).toEqual({ message: 'missing required scope: records:write', path: ['createPost'] });
  });

  test('GET /schema returns the SDL the key sees', async () => {
    const sdl = await (await fetch(`${server.apiUrl}/schema`, { headers: { 'x-api-key': pk } })).text();
    expect(sdl).toContain('type Post implements Record');
    // A public key's only mutations are customer auth (CONTRACT §8): no record writes.
    expect(sdl).not.toContain('createPost');
    expect(sdl).toContain('loginCustomer(email: String!, password: String!): CustomerAuthPayload!');
    expect(sdl).not.toContain('_hasDraft');
  });
});

describe('HTTP surface', () => {
  test('missing key is UNAUTHENTICATED', async () => {
    const r = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"query":"{ _schemaVersion }"}',
    });
    const body: any = await r.json();
    expect(body.errors[0]).toEqual({ message: 'Authentication required', extensions: { code: 'UNAUTHENTICATED' } });
  });

  test('malformed JSON is HTTP 400 with a JSON error', async () => {
    const r = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pk },
      body: '{"query":',
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  test('GET runs queries and refuses mutations with 405', async () => {
    const q = encodeURIComponent('{ posts(first: 1) { totalCount } }');
    const ok = await fetch(`${server.apiUrl}/graphql?query=${q}`, { headers: { 'x-api-key': pk } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as any).data.posts.totalCount).toBeGreaterThan(0);
    const m = encodeURIComponent('mutation { deletePost(_id: "x") }');
    const no = await fetch(`${server.apiUrl}/graphql?query=${m}`, { headers: { 'x-api-key': sk } });
    expect(no.status).toBe(405);
  });

  test('GET /graphiql serves GraphiQL from its own bundle (no CDN)', async () => {
    const r = await fetch(`${server.apiUrl}/graphiql`);
    expect(r.status).toBe(200);
    const html = await r.text();
    expect(html).toMatch(/<script type="module" src="\/studio\/explorer\/graphiql-page-[a-z0-9]+\.js">/);
    expect(html).not.toMatch(/(src|href)="https?:/);
  }, 60_000);

  test('depth, alias and page-size limits fail before execution', async () => {
    const deep = `{ posts { edges { node { author { ... on Author { _id } } } } } }`;
    expect((await p.gql(pk, deep)).body.errors).toBeUndefined();
    let nested = 'name';
    for (let i = 0; i < 14; i++) nested = `ofType { ${nested} }`;
    // Introspection does not count towards the depth limit (test/graphql/limits.test.ts).
    const introspection = await p.gql(pk, `{ __schema { types { fields { type { ${nested} } } } } }`);
    expect(introspection.body.errors).toBeUndefined();
    const aliases = Array.from({ length: 31 }, (_, i) => `a${i}: _schemaVersion`).join(' ');
    expect((await p.gql(pk, `{ ${aliases} }`)).body.errors[0].extensions.code).toBe('TOO_MANY_ALIASES');
    const costly = await p.gql(
      pk,
      `{ posts(first: 100) { edges { node { tags { label _id _createdAt _updatedAt naturalKey content } } } } a: posts(first: 100) { edges { node { tags { label _id _createdAt _updatedAt naturalKey content } } } } }`,
    );
    expect(costly.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
  });
});
