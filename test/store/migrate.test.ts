import { describe, expect, test } from 'bun:test';
import { connect } from '../../src/store/db.ts';
import { listMigrations, migrate } from '../../src/store/migrate.ts';
import { freshDatabase } from '../support/db.ts';

describe('migrations', () => {
  test('applying twice applies nothing the second time', async () => {
    const sql = connect(await freshDatabase('mig'), { max: 2 });
    const first = await migrate(sql);
    expect(first).toEqual(listMigrations().map((m) => m.name));
    expect(await migrate(sql)).toEqual([]);
    const rows = await sql`select name from svc_migrations order by name`;
    expect(rows.map((r) => r.name)).toEqual(first);
    await sql.end();
  });

  test('processes starting at once apply each migration exactly once', async () => {
    const url = await freshDatabase('mig2');
    const script = `import { connect } from './src/store/db.ts'; import { migrate } from './src/store/migrate.ts';
      const sql = connect(process.env.U); const a = await migrate(sql); console.log(JSON.stringify(a)); await sql.end();`;
    const run = () =>
      Bun.spawn([process.execPath, '-e', script], {
        env: { ...process.env, U: url },
        cwd: `${import.meta.dir}/../..`,
        stdout: 'pipe',
        stderr: 'pipe',
      });
    // Four at once: the creation of the migrations table raced too (PostgreSQL 18 refused the
    // loser with 42710, "type already exists"), and more racers make a race show.
    const procs = [run(), run(), run(), run()];
    const text = (s: ReadableStream<Uint8Array>) => new Response(s).text();
    const outs = await Promise.all(
      procs.map(async (p) => ({ out: await text(p.stdout), err: await text(p.stderr), code: await p.exited })),
    );
    // A failing child's own words, so a failure says why.
    for (const o of outs) expect({ code: o.code, err: o.err }).toEqual({ code: 0, err: '' });
    const applied = outs.flatMap((o) => JSON.parse(o.out) as string[]).sort();
    expect(applied).toEqual(listMigrations().map((m) => m.name));
    const sql = connect(url, { max: 1 });
    const [row] = await sql`select count(*)::int as n from svc_migrations`;
    const n = row?.n;
    expect(n).toBe(listMigrations().length);
    await sql.end();
  });
});
