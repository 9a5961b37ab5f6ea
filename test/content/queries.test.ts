import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;
const N = 1000;

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [
    {
      key: 'item',
      name: 'Item',
      versioned: false,
      fields: [
        { key: 'name', type: 'text', queryable: true },
        { key: 'n', type: 'number', queryable: true },
        { key: 'even', type: 'boolean', queryable: true },
        { key: 'day', type: 'date', queryable: true },
        {
          key: 'size',
          type: 'enum',
          queryable: true,
          config: {
            options: [
              { value: 's', label: 'S' },
              { value: 'm', label: 'M' },
              { value: 'l', label: 'L' },
            ],
          },
        },
        { key: 'tags', type: 'list', itemType: 'text', queryable: true },
        { key: 'note', type: 'text' },
      ],
    },
  ]);
  sk = await p.key('sk', ALL_SECRET);
  pk = await p.key('pk', ['records:read', 'search:read']);
  for (let start = 0; start < N; start += 100) {
    const operations = [];
    for (let i = start; i < start + 100; i++) {
      operations.push({
        action: 'CREATE',
        modelKey: 'item',
        naturalKey: `i${i}`,
        data: {
          name: `item ${String(i).padStart(4, '0')}`,
          n: i % 7 === 0 ? null : (i * 37) % 101,
          even: i % 2 === 0,
          day: new Date(Date.UTC(2024, 0, 1 + (i % 60))).toISOString(),
          size: ['s', 'm', 'l'][i % 3],
          tags: i % 10 === 0 ? ['ten'] : [],
          note: i === 5 ? 'the quick brown fox' : 'lorem',
        },
      });
    }
    const r = await p.gql(
      sk,
      `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`,
      { operations: undefined, ops: operations },
    );
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  }
}, 120_000);
afterAll(() => server.stop());

async function all(where: unknown, orderBy: unknown, first = 100): Promise<{ names: string[]; total: number }> {
  const names: string[] = [];
  let after: string | null = null;
  let total = 0;
  for (;;) {
    const r = await p.gql(
      pk,
      `query($w: ItemWhere, $o: [ItemOrderBy!], $a: String, $f: Int) {
      items(first: $f, after: $a, where: $w, orderBy: $o) { totalCount edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }`,
      { w: where, o: orderBy, a: after, f: first },
    );
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
    const c = r.body.data.items;
    total = c.totalCount;
    names.push(...c.edges.map((e: any) => e.node.name));
    if (!c.pageInfo.hasNextPage) return { names, total };
    after = c.pageInfo.endCursor;
  }
}

describe('pagination', () => {
  test('1,000 records page through in creation order with no gaps or repeats', async () => {
    const { names, total } = await all(null, null);
    expect(total).toBe(N);
    expect(names).toHaveLength(N);
    expect(new Set(names).size).toBe(N);
    expect(names[0]).toBe('item 0000');
    expect(names[999]).toBe('item 0999');
  });

  test('keyset pages stay stable while records are inserted before the cursor', async () => {
    const first = await p.gql(
      pk,
      `{ items(first: 50, orderBy: [{ field: name }]) { edges { node { name } } pageInfo { endCursor } } }`,
    );
    await p.gql(sk, `mutation { createItem(data: { name: "item 0000a" }) { _id } }`);
    const next = await p.gql(
      pk,
      `query($a: String) { items(first: 1, after: $a, orderBy: [{ field: name }]) { edges { node { name } } } }`,
      { a: first.body.data.items.pageInfo.endCursor },
    );
    expect(next.body.data.items.edges[0].node.name).toBe('item 0050');
  });

  test('page size is capped', async () => {
    const r = await p.gql(pk, `{ items(first: 1000) { totalCount } }`);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});

describe('where and orderBy per queryable type', () => {
  test('number: range, ordering DESC with nulls last, across pages', async () => {
    const { names, total } = await all(
      { n: { gte: 50, lt: 60 } },
      [{ field: 'n', direction: 'DESC' }, { field: 'name' }],
      7,
    );
    expect(total).toBe(names.length);
    const r = await p.gql(
      pk,
      `{ items(first: 100, where: { n: { gte: 50, lt: 60 } }, orderBy: [{ field: n, direction: DESC }]) { edges { node { n } } } }`,
    );
    const ns = r.body.data.items.edges.map((e: any) => e.node.n);
    expect(ns.length).toBe(names.length);
    expect(ns).toEqual([...ns].sort((a, b) => b - a));
    expect(ns.every((x: number) => x >= 50 && x < 60)).toBe(true);
    const nulls = await all({ n: { eq: null } }, null);
    expect(nulls.total).toBe(Math.ceil(N / 7) + 1); // + "item 0000a", created without n
    const sorted = await all(null, [{ field: 'n' }]);
    expect(sorted.names.length).toBe(N + 1);
  });

  test('text: eq, in, contains, NOT, OR', async () => {
    expect((await all({ name: { eq: 'item 0042' } }, null)).names).toEqual(['item 0042']);
    expect((await all({ name: { in: ['item 0001', 'item 0002'] } }, null)).total).toBe(2);
    expect((await all({ name: { contains: '099' } }, null)).names).toEqual([
      'item 0099',
      'item 0990',
      'item 0991',
      'item 0992',
      'item 0993',
      'item 0994',
      'item 0995',
      'item 0996',
      'item 0997',
      'item 0998',
      'item 0999',
    ]);
    expect(
      (
        await all({ OR: [{ name: { eq: 'item 0001' } }, { name: { eq: 'item 0003' } }] }, [
          { field: 'name', direction: 'DESC' },
        ])
      ).names,
    ).toEqual(['item 0003', 'item 0001']);
    expect((await all({ NOT: { name: { contains: 'item 0' } } }, null)).total).toBe(0);
  });

  test('boolean, enum, date and list contains', async () => {
    expect((await all({ even: { eq: true } }, null)).total).toBe(500);
    expect((await all({ size: { in: ['s', 'l'] } }, null)).total).toBe(667);
    expect((await all({ day: { lt: '2024-01-02T00:00:00.000Z' } }, null)).total).toBe(17);
    const byDay = await p.gql(
      pk,
      `{ items(first: 3, orderBy: [{ field: day, direction: DESC }, { field: name }]) { edges { node { day name } } } }`,
    );
    expect(byDay.body.data.items.edges[0].node.day).toBe('2024-02-29T00:00:00.000Z');
    expect((await all({ tags: { contains: 'ten' } }, null)).total).toBe(100);
    expect((await all({ AND: [{ even: { eq: true } }, { size: { eq: 's' } }] }, null)).total).toBe(167);
  });

  test('sorting or filtering on a non-queryable field fails validation', async () => {
    const s = await p.gql(pk, `{ items(orderBy: [{ field: note }]) { totalCount } }`);
    expect(s.status).toBe(400);
    expect(s.body.errors[0].message).toContain('note');
    expect(s.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const w = await p.gql(pk, `{ items(where: { note: { eq: "x" } }) { totalCount } }`);
    expect(w.status).toBe(400);
  });
});

describe('search', () => {
  test('full-text search over text fields', async () => {
    const r = await p.gql(pk, `{ searchItems(query: "quick fox") { totalCount edges { node { name } } } }`);
    expect(r.body.data.searchItems.edges.map((e: any) => e.node.name)).toEqual(['item 0005']);
    const g = await p.gql(
      sk,
      `{ searchRecords(query: "brown", modelKeys: ["item"]) { totalCount edges { node { _id _modelKey ... on Item { name } } } } }`,
    );
    expect(g.body.data.searchRecords.edges[0].node).toMatchObject({ _modelKey: 'item', name: 'item 0005' });
  });
});
