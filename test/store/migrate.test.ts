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

  test('two processes starting at once apply each migration exactly once', async () => {
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
    const [a, b] = [run(), run()];
    const text = (s: ReadableStream<Uint8Array>) => new Response(s).text();
    const [outA, outB, errA, errB] = await Promise.all([
      text(a.stdout),
      text(b.stdout),
      text(a.stderr),
      text(b.stderr),
    ]);
    // A failing child's own words, so a failure says why.
    expect({ code: await a.exited, err: errA }).toEqual({ code: 0, err: '' });
    expect({ code: await b.exited, err: errB }).toEqual({ code: 0, err: '' });
    const applied = [...JSON.parse(outA), ...JSON.parse(outB)].sort();
    expect(applied).toEqual(listMigrations().map((m) => m.name));
    const sql = connect(url, { max: 1 });
    const [row] = await sql`select count(*)::int as n from svc_migrations`;
    const n = row?.n;
    expect(n).toBe(listMigrations().length);
    await sql.end();
  });
});
