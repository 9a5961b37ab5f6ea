import { describe, expect, test } from 'bun:test';
import { chmodSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { alive } from '../../src/store/embedded.ts';
import { tempDir } from '../support/tmp.ts';
import { eventually } from '../support/eventually.ts';

const ROOT = join(import.meta.dir, '..', '..');

/** Every process whose command line mentions `needle` (ps works on Linux and macOS). */
function processesMentioning(needle: string): string[] {
  const out = Bun.spawnSync(['ps', '-eo', 'pid,args']).stdout.toString();
  return out.split('\n').filter((l) => l.includes(needle) && !l.includes('ps -eo'));
}

function envWithout(...names: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !names.includes(k)) env[k] = v;
  return env;
}

describe('embedded PostgreSQL never outlives its owner', () => {
  test('kill -9 of the owning process stops the server within seconds', async () => {
    const dataDir = tempDir('svc-orphan-');
    const owner = Bun.spawn([process.execPath, join(import.meta.dir, 'fixtures', 'own-embedded.ts'), dataDir], {
      stdout: 'pipe',
      stderr: 'inherit',
    });
    const reader = owner.stdout.getReader();
    let line = '';
    while (!line.includes('\n')) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the owner exited before starting PostgreSQL');
      line += new TextDecoder().decode(value);
    }
    const { pid } = JSON.parse(line) as { pid: number };
    expect(alive(pid)).toBe(true);
    owner.kill('SIGKILL');
    await owner.exited;
    await eventually(() => !alive(pid), 20_000);
    expect(processesMentioning(join(dataDir, 'pg'))).toEqual([]);
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  test('`bun test` with DATABASE_URL unset leaves no PostgreSQL and no temporary folder behind', async () => {
    // A one-test suite using the real preload, in a private TMPDIR so its folders are ours to see.
    const suite = tempDir('svc-suite-');
    const tmp = tempDir('svc-tmp-');
    chmodSync(tmp, 0o711); // as root, PostgreSQL runs as "postgres", which must enter it
    writeFileSync(
      join(suite, 'bunfig.toml'),
      `[test]\npreload = [${JSON.stringify(join(ROOT, 'test', 'preload.ts'))}]\n`,
    );
    writeFileSync(
      join(suite, 'db.test.ts'),
      `
      import { test, expect } from 'bun:test';
      import postgres from ${JSON.stringify(join(ROOT, 'node_modules', 'postgres', 'src', 'index.js'))};
      test('the embedded server answers', async () => {
        console.log('EMBEDDED_DIR=' + process.env.SVC_TEST_EMBEDDED_DIR);
        const sql = postgres(process.env.DATABASE_URL, { max: 1 });
        expect((await sql\`select 1 as one\`)[0].one).toBe(1);
        await sql.end();
      });
    `,
    );
    const run = Bun.spawn([process.execPath, 'test'], {
      cwd: suite,
      env: { ...envWithout('DATABASE_URL', 'SVC_TEST_EMBEDDED_DIR'), TMPDIR: tmp },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [code, out, err] = [
      await run.exited,
      await new Response(run.stdout).text(),
      await new Response(run.stderr).text(),
    ];
    expect(`${code} ${err}`).toContain('0 fail');
    expect(code).toBe(0);
    const dir = /EMBEDDED_DIR=(\S+)/.exec(out + err)?.[1];
    expect(dir?.startsWith(tmp)).toBe(true);
    // Stopped before the runner exited: no grace period.
    expect(processesMentioning(dir!)).toEqual([]);
    expect(existsSync(dir!)).toBe(false);
    for (const d of [suite, tmp]) rmSync(d, { recursive: true, force: true });
  }, 90_000);
});
