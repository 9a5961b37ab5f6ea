import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { listRecords, type ListArgs } from '../../src/content/read.ts';
import { desiredIndexes, reconcileIndexes } from '../../src/content/indexes.ts';
import type { ModelDef } from '../../src/projects/types.ts';
import type { ReadScope } from '../../src/content/types.ts';
import type { Sql } from '../../src/store/db.ts';

/**
 * Per-field expression indexes (src/content/indexes.ts): created after a push, used by the
 * planner for the exact statement the builder produces (also as a generic prepared plan),
 * dropped when the field stops being queryable or the model goes.
 */
let server: TestServer;
let p: GqlProject;
let sk: string;
const N = 2000;

const product = (queryablePrice = true): ModelDef => ({
  key: 'product',
  name: 'Product',
  versioned: false,
  fields: [
    { key: 'title', type: 'text', queryable: true },
    { key: 'price', type: 'number', queryable: queryablePrice },
    { key: 'onSale', type: 'boolean', queryable: true },
    { key: 'day', type: 'date', queryable: true },
    { key: 'tags', type: 'list', itemType: 'text', queryable: true },
    { key: 'body', type: 'richtext', queryable: true },
  ],
});
const note: ModelDef = { key: 'note', name: 'Note', fields: [{ key: 'code', type: 'text', queryable: true }] };

async function tracked(): Promise<{ name: string; model_key: string; field_key: string }[]> {
  return server.svc
    .sql`select name, model_key, field_key from record_field_indexes where project_id = ${p.projectId} order by model_key, field_key`;
}

async function existing(names: string[]): Promise<{ relname: string; valid: boolean }[]> {
  return server.svc
    .sql`select c.relname, i.indisvalid as valid from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = any(${names}::text[])`;
}

/** The list statement exactly as the builder emits it: `listRecords` over a capturing client. */
async function capture(model: ModelDef, args: Partial<ListArgs>): Promise<{ text: string; params: unknown[] }> {
  let got: { text: string; params: unknown[] } | undefined;
  const fake = {
    unsafe: (text: string, params: unknown[]) => ((got = { text, params }), Promise.resolve([])),
  } as unknown as Sql;
  const scope: ReadScope = { projectId: p.projectId, stage: 'published', locale: 'en', defaultLocale: 'en' };
  await listRecords(fake, scope, model, { first: 20, withTotal: false, ...args });
  return got!;
}

const lit = (v: unknown): string =>
  v === null
    ? 'null'
    : Array.isArray(v)
      ? `'{${v.map((x) => `"${String(x)}"`).join(',')}}'`
      : `'${String(v).replace(/'/g, "''")}'`;

/** EXPLAIN of the statement as a named prepared statement, with the custom and the generic plan. */
async function plans(q: { text: string; params: unknown[] }): Promise<{ custom: string; generic: string }> {
  const conn = await (server.svc.sql as any).reserve();
  try {
    await conn.unsafe(`prepare q as ${q.text}`);
    const exec = `explain (costs off) execute q(${q.params.map(lit).join(', ')})`;
    const custom = (await conn.unsafe(exec)).map((r: any) => r['QUERY PLAN']).join('\n');
    await conn.unsafe('set plan_cache_mode = force_generic_plan');
    const generic = (await conn.unsafe(exec)).map((r: any) => r['QUERY PLAN']).join('\n');
    await conn.unsafe('reset plan_cache_mode');
    await conn.unsafe('deallocate q');
    return { custom, generic };
  } finally {
    conn.release();
  }
}

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [product(), note]);
  await server.svc.indexes.idle();
  sk = await p.key('sk', ALL_SECRET);
  for (let start = 0; start < N; start += 100) {
    const ops = [];
    for (let i = start; i < start + 100; i++) {
      ops.push({
        action: 'CREATE',
        modelKey: 'product',
        data: {
          title: `p${String(i).padStart(4, '0')}`,
          price: i % 50 === 0 ? null : (i * 7919) % 1000,
          onSale: i % 3 === 0,
          day: new Date(Date.UTC(2024, 0, 1 + (i % 300))).toISOString(),
        },
      });
    }
    const r = await p.gql(
      sk,
      `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`,
      { ops },
    );
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  }
  await server.svc.sql`analyze record_content`;
}, 120_000);
afterAll(() => server.stop());

describe('per-field indexes', () => {
  test('a push creates one valid index per queryable scalar field (not lists, not rich text)', async () => {
    const rows = await tracked();
    expect(rows.map((r) => `${r.model_key}.${r.field_key}`)).toEqual([
      'note.code',
      'product.day',
      'product.onSale',
      'product.price',
      'product.title',
    ]);
    const want = desiredIndexes(p.projectId, [product(), note])
      .map((w) => w.name)
      .sort();
    expect(rows.map((r) => r.name).sort()).toEqual(want);
    const idx = await existing(want);
    expect(idx).toHaveLength(5);
    expect(idx.every((i) => i.valid)).toBe(true);
  });

  test('the builder statement for a range filter + orderBy is served by the field index, custom and generic plans', async () => {
    const [priceIdx] = desiredIndexes(p.projectId, [product()]).filter((w) => w.fieldKey === 'price');
    const name = priceIdx!.name;
    const range = await capture(product(), {
      where: { price: { gte: 100, lt: 400 } },
      orderBy: [{ field: 'price', direction: 'ASC' }],
    });
    expect(range.text).toContain(`c.project_id = '${p.projectId}'`);
    // The range is an Index Cond of the field index whatever plan the costs pick (for ~30% of
    // the rows the custom plan may prefer a bitmap scan plus a top-N sort).
    const rangeCond = new RegExp(
      `Index Scan (using|on) ${name}[^\\n]*\\n\\s*Index Cond: [^\\n]*numeric >= [^\\n]*numeric < `,
    );
    for (const plan of Object.values(await plans(range))) {
      expect(plan).toMatch(rangeCond);
      expect(plan).not.toContain('Seq Scan on record_content');
    }
    // A range with a first page of a wide match, and a bare sort: an ordered Index Scan, no sort step.
    for (const args of [{ where: { price: { gte: 10 } } }, { where: null }]) {
      const q = await capture(product(), { ...args, orderBy: [{ field: 'price', direction: 'ASC' }] });
      for (const plan of Object.values(await plans(q))) {
        expect(plan).toContain(`Index Scan using ${name} on record_content c`);
        expect(plan).not.toMatch(/^\s*(->\s*)?(Incremental )?Sort\b/m);
      }
    }
  });

  test('the index serves a date range and a boolean filter too', async () => {
    const byField = new Map(desiredIndexes(p.projectId, [product()]).map((w) => [w.fieldKey, w.name]));
    const d = await plans(
      await capture(product(), { where: { day: { gte: '2024-03-01T00:00:00.000Z' } }, orderBy: [{ field: 'day' }] }),
    );
    expect(d.generic).toContain(`Index Scan using ${byField.get('day')}`);
    const b = await plans(
      await capture(product(), { where: { onSale: { ne: true } }, orderBy: [{ field: 'onSale' }] }),
    );
    expect(b.generic).toContain(byField.get('onSale')!);
  });

  test('results over the index: range, both directions, nulls last, pages without gaps', async () => {
    const q = `query($w: ProductWhere, $o: [ProductOrderBy!], $a: String) { products(first: 100, after: $a, where: $w, orderBy: $o) { totalCount edges { node { title price } } pageInfo { hasNextPage endCursor } } }`;
    const all = async (w: unknown, o: unknown) => {
      const out: { title: string; price: number | null }[] = [];
      let after: string | null = null;
      for (;;) {
        const r = await p.gql(sk, q, { w, o, a: after });
        if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
        out.push(...r.body.data.products.edges.map((e: any) => e.node));
        if (!r.body.data.products.pageInfo.hasNextPage) return out;
        after = r.body.data.products.pageInfo.endCursor;
      }
    };
    const asc = await all({ price: { gte: 100, lt: 400 } }, [{ field: 'price', direction: 'ASC' }]);
    const expected: { title: string; price: number }[] = [];
    for (let i = 0; i < N; i++) {
      const price = i % 50 === 0 ? null : (i * 7919) % 1000;
      if (price !== null && price >= 100 && price < 400)
        expected.push({ title: `p${String(i).padStart(4, '0')}`, price });
    }
    expect(asc.map((x) => x.price)).toEqual(expected.map((x) => x.price).sort((a, b) => a - b));
    expect(asc).toHaveLength(expected.length);
    const desc = await all(null, [{ field: 'price', direction: 'DESC' }]);
    expect(desc).toHaveLength(N);
    expect(desc[0]!.price).toBe(999);
    expect(desc.slice(-40).every((x) => x.price === null)).toBe(true);
    expect(new Set(desc.map((x) => x.title)).size).toBe(N);
    const ascAll = await all(null, [{ field: 'price' }]);
    expect(ascAll.slice(-40).every((x) => x.price === null)).toBe(true);
    expect(ascAll[0]!.price).toBe(1);
  });

  test('a value too large for its btree index is BAD_USER_INPUT naming the field, and changes nothing', async () => {
    const long = randomBytes(6000).toString('hex');
    const r = await p.gql(sk, `mutation($t: String) { createProduct(data: { title: $t, price: 1 }) { _id } }`, {
      t: long,
    });
    expect(r.body.errors[0].extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'title' });
    const c = await p.gql(sk, `{ products(first: 1) { totalCount } }`);
    expect(c.body.data.products.totalCount).toBe(N);
  });

  test('reconciling again changes nothing; two at once do not collide', async () => {
    const [a, b] = await Promise.all([
      reconcileIndexes(server.svc.sql, p.projectId),
      reconcileIndexes(server.svc.sql, p.projectId),
    ]);
    const done = [a, b].filter((r) => r.status === 'done');
    expect(done.length).toBeGreaterThan(0);
    for (const r of done) if (r.status === 'done') expect([r.created, r.dropped, r.failed]).toEqual([[], [], []]);
    expect(await tracked()).toHaveLength(5);
  });

  test('values that do not fit the new type: the build fails cleanly, reads still work', async () => {
    const r = await p.gql(sk, `mutation { createNote(data: { code: "abc" }) { _id } }`);
    expect(r.body.errors).toBeUndefined();
    const changed: ModelDef = { ...note, fields: [{ key: 'code', type: 'number', queryable: true }] };
    await p.setModels([product(), changed]);
    await server.svc.indexes.idle();
    const out = await reconcileIndexes(server.svc.sql, p.projectId);
    expect(out.status).toBe('done');
    if (out.status === 'done') expect(out.failed).toHaveLength(1);
    const codeIdx = desiredIndexes(p.projectId, [changed])[0]!.name;
    expect(await existing([codeIdx])).toHaveLength(0);
    expect((await tracked()).map((t) => t.field_key)).toEqual(['day', 'onSale', 'price', 'title']);
    // The old text index of note.code is gone too.
    expect(await existing([desiredIndexes(p.projectId, [note])[0]!.name])).toHaveLength(0);
  });

  test('removing `queryable` drops the index; removing the model drops its indexes', async () => {
    const before = desiredIndexes(p.projectId, [product()]);
    const price = before.find((w) => w.fieldKey === 'price')!.name;
    await p.setModels([product(false)]);
    await server.svc.indexes.idle();
    expect(await existing([price])).toHaveLength(0);
    expect((await tracked()).map((t) => t.field_key)).toEqual(['day', 'onSale', 'title']);
    // Sorting on it is now a validation error (not queryable), filtering elsewhere still works.
    const r = await p.gql(sk, `{ products(first: 1, orderBy: [{ field: price }]) { totalCount } }`);
    expect(r.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');

    await p.setModels([]);
    await server.svc.indexes.idle();
    expect(await tracked()).toHaveLength(0);
    expect(await existing(before.map((w) => w.name))).toHaveLength(0);
  });
});
