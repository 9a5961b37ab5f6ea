import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { getIntrospectionQuery } from 'graphql';
import type { TestServer } from '../support/server.ts';
import { startKeyedProject, type GqlProject } from './helpers.ts';

/** Issue 10 rows 1 and 2: document limits are linear, stop early, and leave introspection alone. */
let server: TestServer;
let p: GqlProject;
let pk: string;
let sk: string;

beforeAll(async () => {
  ({ server, p, sk, pk } = await startKeyedProject([
    {
      key: 'page',
      name: 'Page',
      fields: [
        { key: 'title', type: 'text', queryable: true },
        { key: 'parent', type: 'reference', config: { modelKey: 'page' } },
      ],
    },
  ]));
  const r = await p.gql(sk, `mutation { createPage(data: { title: "home" }) { _id } }`);
  await p.gql(sk, `mutation($id: ID!) { publishPageVersion(_id: $id) { _id } }`, { id: r.body.data.createPage._id });
});
afterAll(() => server.stop());

/** `fragment F0 { ...F1 ...F1 } … fragment F<n> { <leaf> }`: 2^n leaves once expanded. */
function doubling(n: number, leaf: string): string {
  const defs = Array.from({ length: n }, (_, i) => `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`);
  return `query { ...F0 } ${defs.join(' ')} fragment F${n} on Query { ${leaf} }`;
}

async function normalRead(): Promise<void> {
  const r = await p.gql(pk, `{ pages { edges { node { title } } } }`);
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.pages.edges[0].node.title).toBe('home');
}

function chain(levels: number): string {
  let sel = 'title';
  for (let i = 0; i < levels; i++) sel = `parent { ${sel} }`;
  return sel;
}

describe('row 1: limit checks are linear and stop early', () => {
  // Before the fix this request kept the event loop busy for good (the test timed out).
  test('the doubling fragment query of the issue answers with QUERY_TOO_COMPLEX', async () => {
    const r = await p.gql(pk, doubling(40, '_schemaVersion'));
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    await normalRead();
  }, 30_000);

  test('aliases multiplied through fragments are counted once per fragment', async () => {
    const r = await p.gql(pk, doubling(40, 'v: _schemaVersion'));
    expect(r.status).toBe(400);
    expect(['TOO_MANY_ALIASES', 'QUERY_TOO_COMPLEX']).toContain(r.body.errors[0].extensions.code);
    const few = await p.gql(pk, doubling(4, 'v: _schemaVersion'));
    expect(few.body.errors).toBeUndefined();
    expect(few.body.data.v).toBeNumber();
  }, 30_000);

  test('a connection costs its page size once: edges and node add no second multiplier', async () => {
    const fields = '_id _modelKey _createdAt _updatedAt _publishedAt naturalKey content title';
    const full = await p.gql(
      pk,
      `{ pages(first: 100) { totalCount edges { cursor node { ${fields} parent { ${fields} } } } pageInfo { hasNextPage endCursor } } }`,
    );
    expect(full.body.errors).toBeUndefined();
  });

  test('depth through fragments', async () => {
    const ok = await p.gql(pk, `{ pages { edges { node { ...P } } } } fragment P on Page { ${chain(8)} }`);
    expect(ok.body.errors).toBeUndefined();
    const deep = await p.gql(pk, `{ pages { edges { node { ...P } } } } fragment P on Page { ${chain(10)} }`);
    expect(deep.status).toBe(400);
    expect(deep.body.errors[0].extensions.code).toBe('QUERY_TOO_DEEP');
  });

  test('selections nested through hundreds of fragments stop at the nesting bound', async () => {
    const defs = Array.from({ length: 300 }, (_, i) => `fragment N${i} on Query { ...N${i + 1} }`).join(' ');
    const r = await p.gql(pk, `{ ...N0 } ${defs} fragment N300 on Query { _schemaVersion }`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('QUERY_TOO_DEEP');
  });

  // graphql-js compares same-named fields pairwise while validating: thousands of them cost
  // the event loop seconds, so they are refused before validation.
  test('thousands of same-named fields in one selection are refused before validation', async () => {
    const fields = Array.from({ length: 1000 }, (_, i) => `page(_id: "${i}") { title }`).join(' ');
    const r = await p.gql(pk, `{ ${fields} }`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    const viaFragments = Array.from(
      { length: 20 },
      (_, i) =>
        `fragment G${i} on Query { ${Array.from({ length: 40 }, (_, j) => `page(_id: "${i}-${j}") { title }`).join(' ')} }`,
    );
    const r2 = await p.gql(pk, `{ ${viaFragments.map((_, i) => `...G${i}`).join(' ')} } ${viaFragments.join(' ')}`);
    expect(r2.status).toBe(400);
    expect(r2.body.errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    await normalRead();
  });
});

describe('row 2: introspection is not counted against the depth limit', () => {
  test('the standard introspection query of graphql-js loads the schema', async () => {
    const r = await p.gql(
      pk,
      getIntrospectionQuery({
        descriptions: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
        inputValueDeprecation: true,
      }),
    );
    expect(r.status).toBe(200);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.__schema.types.map((t: { name: string }) => t.name)).toContain('Page');
  });

  test('data fields keep their depth limit', async () => {
    const r = await p.gql(pk, `{ pages { edges { node { ${chain(10)} } } } }`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('QUERY_TOO_DEEP');
  });

  test('introspection keeps its own bound on nested type lists', async () => {
    const r = await p.gql(pk, `{ __type(name: "Page") { fields { type { fields { type { fields { name } } } } } } }`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].message).toContain('Maximum introspection depth exceeded');
  });
});

describe('issue 27 item 13: deeply nested variables are bounded before any recursive walk', () => {
  /** Built as text: the test's own JSON.stringify would overflow its stack on these values. */
  function nestedWhere(levels: number, list: boolean): string {
    return (
      (list ? '{"AND":[' : '{"AND":').repeat(levels) + '{"title":{"eq":"home"}}' + (list ? ']}' : '}').repeat(levels)
    );
  }
  async function post(key: string, body: string) {
    const res = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body,
    });
    return { status: res.status, body: (await res.json()) as any };
  }
  const QUERY = 'query($w: PageWhere) { pages(where: $w) { edges { node { title } } } }';

  for (const [levels, list] of [
    [20_000, true],
    [20_000, false],
    [90_000, false],
    [3_000, true],
  ] as const) {
    test(`${levels} nested AND levels (${list ? 'lists' : 'objects'}) answer BAD_USER_INPUT naming "where"`, async () => {
      for (const key of [pk, sk]) {
        const r = await post(key, `{"query":${JSON.stringify(QUERY)},"variables":{"w":${nestedWhere(levels, list)}}}`);
        expect(r.status).toBeLessThan(500);
        expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
        expect(r.body.errors[0].extensions.field).toBe('where');
        expect(r.body.errors[0].message).toContain('levels deep');
      }
      await normalRead();
    }, 30_000);
  }

  test('in an HTTP batch, the deep operation fails alone', async () => {
    const r = await post(
      pk,
      `[{"query":${JSON.stringify(QUERY)},"variables":{"w":${nestedWhere(20_000, true)}}},{"query":"{ pages { edges { node { title } } } }"}]`,
    );
    expect(r.status).toBe(200);
    expect(r.body[0].errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body[1].data.pages.edges[0].node.title).toBe('home');
  }, 30_000);

  test('a where nested within the input bound but past the filter bound is still refused', async () => {
    const r = await post(pk, `{"query":${JSON.stringify(QUERY)},"variables":{"w":${nestedWhere(20, true)}}}`);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toContain('"where" may nest');
  });
});
