import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connectContentSql, type ContentSql, type Sql } from '../../src/store/db.ts';
import { EventBus } from '../../src/bus/bus.ts';
import { WriteCommitter, WriteTx, type Handle } from '../../src/content/tx.ts';
import {
  createRecord,
  publishRecord,
  unpublishRecord,
  updateRecord,
  type WriteContext,
} from '../../src/content/write.ts';
import type { ModelDef } from '../../src/projects/types.ts';
import { migratedDatabase } from '../support/db.ts';

/**
 * The write functions' calls go as EXECUTE of statements each connection prepares once
 * (src/content/tx.ts, sql/029_write_pg_cost.sql). A connection without them learns it from the
 * EXECUTE's error and sends the transaction again with the statements prepared: the first write
 * on a connection, and the first of each kind, must still succeed once and answer as before.
 */
let sql: Sql;
let url: string;
let contentSql: ContentSql;
const note: ModelDef = {
  key: 'note',
  name: 'Note',
  fields: [
    { key: 'title', type: 'text', required: true },
    { key: 'tags', type: 'list', itemType: 'text' },
  ],
};
const setting: ModelDef = {
  key: 'setting',
  name: 'Setting',
  versioned: false,
  fields: [{ key: 'value', type: 'text' }],
};
const ctx: WriteContext = {
  projectId: 'prj_prepared',
  defaultLocale: 'en',
  userId: 'key_prepared',
  models: (k) => [note, setting].find((m) => m.key === k),
};

beforeAll(async () => {
  const db = await migratedDatabase('prepared');
  sql = db.sql;
  url = db.url;
  await sql`insert into tenants (id, name) values ('ten_prepared', 'prepared')`;
  await sql`insert into projects (id, tenant_id, name) values (${ctx.projectId}, 'ten_prepared', 'prepared')`;
  // One connection: every transaction below meets what the ones before it prepared.
  contentSql = connectContentSql(db.url, { max: 1 });
});
afterAll(async () => {
  await contentSql.close({ timeout: 5 });
  await sql.end({ timeout: 5 });
});

type Row = {
  id: string;
  natural_key: string | null;
  has_draft: boolean;
  published_at: Date | null;
  data: Record<string, unknown>;
};

async function one(writes: WriteCommitter, step: ReturnType<typeof createRecord>): Promise<Row | undefined> {
  const tx = new WriteTx({ projectId: ctx.projectId, userId: ctx.userId });
  const h = tx.written<Row>({ ...step, row: step.row! }) as Handle<Row>;
  return (await writes.commit(tx)).rows(h)[0];
}

test('writes answer the same through EXECUTE, on a fresh connection and for each kind met first', async () => {
  const writes = new WriteCommitter(contentSql, new EventBus());
  const c = await one(writes, createRecord(ctx, note, { naturalKey: 'a', data: { title: 'A', tags: ['x', '$q$'] } }));
  expect(c).toMatchObject({
    natural_key: 'a',
    has_draft: true,
    published_at: null,
    data: { title: 'A', tags: ['x', '$q$'] },
  });
  const id = c!.id;
  // An update whose required-field list is empty (an empty array parameter) and one that is not.
  expect(await one(writes, updateRecord(ctx, note, id, 'de', { title: 'B' }))).toMatchObject({
    id,
    data: { title: 'B', tags: ['x', '$q$'] },
  });
  const s = await one(writes, createRecord(ctx, setting, { data: { value: 'v' } }));
  expect(await one(writes, updateRecord(ctx, setting, s!.id, null, { value: 'w' }))).toMatchObject({
    has_draft: false,
    data: { value: 'w' },
  });
  expect(await one(writes, publishRecord(ctx, note, id))).toMatchObject({ id, has_draft: false, data: { title: 'A' } });
  expect((await one(writes, unpublishRecord(ctx, note, id)))?.published_at).toBeNull();
  await writes.close();
  const [{ n }] =
    await contentSql`select count(*)::int as n from pg_prepared_statements where name like 'svc\\_write\\_stmt\\_%'`;
  expect(n).toBe(4);
});

test("errors through EXECUTE are the write's own: NOT_FOUND, BAD_USER_INPUT, CONFLICT", async () => {
  const writes = new WriteCommitter(contentSql, new EventBus());
  await expect(one(writes, publishRecord(ctx, note, 'rec_missing'))).rejects.toMatchObject({ code: 'NOT_FOUND' });
  const c = await one(writes, createRecord(ctx, note, { naturalKey: 'dup', data: {} }));
  await expect(one(writes, publishRecord(ctx, note, c!.id))).rejects.toMatchObject({ code: 'BAD_USER_INPUT' });
  await expect(
    one(writes, createRecord(ctx, note, { naturalKey: 'dup', data: { title: 'again' } })),
  ).rejects.toMatchObject({ code: 'CONFLICT' });
  await writes.close();
});

test('a group of mixed writes, some of whose statements the connection lacks, commits once', async () => {
  // A connection of its own, fresh: nothing prepared on it yet.
  const fresh = connectContentSql(url, { max: 1 });
  const writes = new WriteCommitter(fresh, new EventBus(), { inFlight: 1 });
  try {
    const first = await one(writes, createRecord(ctx, note, { data: { title: 'first' } }));
    // Held back behind a slow transaction, these go as one group: a create it has prepared, an
    // update and a publish it has not.
    const blocker = writes.commit(
      new WriteTx({ projectId: ctx.projectId, userId: ctx.userId }).follow({
        text: 'select pg_sleep(0.2)',
        params: [],
      }),
    );
    const group = Promise.all([
      one(writes, createRecord(ctx, note, { data: { title: 'second' } })),
      one(writes, updateRecord(ctx, note, first!.id, null, { title: 'first, again' })),
      one(writes, publishRecord(ctx, note, first!.id)),
    ]);
    await blocker;
    const [second, updated, published] = await group;
    expect(second?.data).toEqual({ title: 'second' });
    expect(updated?.data).toEqual({ title: 'first, again' });
    expect(published).toMatchObject({ has_draft: false, data: { title: 'first, again' } });
    expect(writes.stats).toMatchObject({ transactions: 5, groups: 3, retriedAlone: 0 });
  } finally {
    await writes.close();
    await fresh.close({ timeout: 5 });
  }
});
