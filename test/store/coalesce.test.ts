import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import postgres from 'postgres';
import { coalescerOf, read } from '../../src/store/coalesce.ts';
import { connectContentSql, type ContentSql } from '../../src/store/db.ts';
import { freshDatabase } from '../support/db.ts';

/**
 * Read coalescing on a real pool (src/store/coalesce.ts): identical reads that wait share one
 * statement, which starts after every one of them arrived — so a read made after a commit sees
 * it even while an identical read begun before the commit is still running — and reads that
 * differ in any way never share.
 */
let url: string;
let admin: postgres.Sql;
let pool: ContentSql;

beforeAll(async () => {
  url = await freshDatabase('coalesce');
  admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin.unsafe('create table coal_t (id int primary key, v int not null); insert into coal_t values (1, 1)');
  // One connection: two statements in flight at most.
  pool = connectContentSql(url, { max: 1, pool: 'coalesce-test', coalesce: true });
});

afterAll(async () => {
  await pool?.close({ timeout: 1 });
  await admin?.end();
});

const SLOW = 'select pg_sleep(0.3)::text as slept, (select v from coal_t where id = 1) as v';

describe('read coalescing', () => {
  test('a read made after a commit sees it, though an identical read from before the commit is still running', async () => {
    await admin.unsafe('update coal_t set v = 1 where id = 1');
    const before = { ...coalescerOf(pool)!.stats };
    const first = read<{ v: number }>(pool, SLOW, []);
    await Bun.sleep(50); // the first statement is running
    await admin.unsafe('update coal_t set v = 2 where id = 1'); // committed
    const later = [read<{ v: number }>(pool, SLOW, []), read<{ v: number }>(pool, SLOW, [])];
    await Bun.sleep(20);
    const latest = read<{ v: number }>(pool, SLOW, []);
    expect((await first)[0]!.v).toBe(1);
    for (const rows of await Promise.all([...later, latest])) expect(rows[0]!.v).toBe(2);
    const s = coalescerOf(pool)!.stats;
    // The three later reads shared one statement, begun when the first ended.
    expect(s.statements - before.statements).toBe(2);
    expect(s.coalesced - before.coalesced).toBe(2);
  });

  test('sharers get the same rows in arrays of their own', async () => {
    const q = 'select g as n from generate_series(1, 5) g, pg_sleep(0.1)';
    const blocker = read(pool, q, []);
    const rs = await Promise.all(Array.from({ length: 6 }, () => read<{ n: number }>(pool, q, [])));
    await blocker;
    rs[0]!.pop();
    expect(rs[0]).toHaveLength(4);
    for (const r of rs.slice(1)) expect(r.map((x) => x.n)).toEqual([1, 2, 3, 4, 5]);
  });

  test('a failing statement fails every read that shared it, and the pool goes on', async () => {
    const bad = 'select 1 / (select 0 from pg_sleep(0.1))';
    const all = await Promise.allSettled(Array.from({ length: 5 }, () => read(pool, bad, [])));
    for (const r of all) {
      expect(r.status).toBe('rejected');
      expect(String((r as PromiseRejectedResult).reason)).toMatch(/division by zero/);
    }
    expect(await read<{ x: number }>(pool, 'select 1 as x', [])).toEqual([{ x: 1 }]);
  });

  test('different statements run side by side, and many waiting reads all get answers', async () => {
    const before = coalescerOf(pool)!.stats.statements;
    const rs = await Promise.all(
      Array.from({ length: 200 }, (_, i) => read<{ x: number }>(pool, 'select $1::int as x', [i % 50])),
    );
    rs.forEach((r, i) => {
      expect(r[0]!.x).toBe(i % 50);
    });
    // 50 distinct statements at least; at most one per read.
    const sent = coalescerOf(pool)!.stats.statements - before;
    expect(sent).toBeGreaterThanOrEqual(50);
    expect(sent).toBeLessThanOrEqual(200);
    expect(coalescerOf(pool)!.waiting).toBe(0);
  });

  test('fuzz: reads whose parameters differ never share an answer (NUL, lone surrogates, non-ASCII, huge, NaN, -0, nested)', async () => {
    type Read = [text: string, params: unknown[]];
    const one: fc.Arbitrary<Read> = fc.oneof(
      fc
        .oneof(
          fc.string({ unit: 'binary', maxLength: 40 }),
          fc.string({ unit: 'grapheme', maxLength: 40 }),
          fc.constantFrom('a\u0000b', '\ud800', 'x\udfffy', '"', '\\', 'null', '[null]', 'x'.repeat(200_000)),
        )
        .map((v): Read => ['select $1::text as j', [v]]),
      fc
        .oneof(fc.double(), fc.constantFrom(Number.NaN, -0, 0, null, Infinity))
        .map((v): Read => ['select $1::float8::text as j', [v]]),
      fc
        .array(fc.oneof(fc.string({ unit: 'binary', maxLength: 8 }), fc.constant(null)), { maxLength: 5 })
        .map((v): Read => ['select $1::text[]::text as j', [v]]),
      fc.boolean().map((v): Read => ['select $1::boolean::text as j', [v]]),
    );
    const answer = (p: Promise<{ j: string }[]>) =>
      p.then(
        (rows) => ({ j: rows[0]!.j }),
        (err: Error) => ({ error: String(err.message).slice(0, 40) }),
      );
    await fc.assert(
      fc.asyncProperty(fc.array(one, { minLength: 2, maxLength: 8 }), async (reads) => {
        // One slow read first, so the others wait and could meet.
        const blocker = read(pool, 'select pg_sleep(0.02)', []);
        const together = await Promise.all(reads.map(([t, p]) => answer(read(pool, t, p))));
        await blocker;
        // Each alone, past the coalescer: what that read's own statement answers.
        for (let i = 0; i < reads.length; i++) {
          const [t, p] = reads[i]!;
          expect(together[i]).toEqual(
            await answer(pool.unsafe(t, p as never[]) as unknown as Promise<{ j: string }[]>),
          );
        }
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});
