import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import type { Subprocess } from 'bun';
import { runCli } from '../../src/cli/main.ts';
import { freshDatabase } from '../support/db.ts';
import { spawnService } from '../support/process.ts';
import { perTestDirs } from '../support/tmp.ts';

/**
 * `svc data rm`: removes what svc made for a data dir — the embedded cluster (also one kept
 * outside, via pg-location), the root token, keys, files, the outbox — and refuses while any svc
 * process or its PostgreSQL runs on it, or when the folder holds nothing svc made.
 */
setDefaultTimeout(120_000);
const ROOT = join(import.meta.dir, '..', '..');
const tempDir = perTestDirs();
const procs: Subprocess[] = [];
/** Clusters kept outside a data dir (as root, under /var/lib/svc/clusters): removed after a failed test too. */
const outside: string[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) {
    p.kill('SIGTERM');
    await p.exited;
  }
  for (const dir of outside.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function svc(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (s) => (out += s + '\n'), err: (s) => (err += s + '\n') }, {});
  return { code, out, err };
}

describe('svc data rm', () => {
  test('the embedded default: refused while svc runs; after SIGTERM, lists without --yes, then removes the cluster and the data dir', async () => {
    const dataDir = join(tempDir('svc-datarm-'), 'data');
    // DATABASE_URL empty is unset: the embedded PostgreSQL, in the data dir.
    const s = await spawnService(
      { DATABASE_URL: '', SVC_ROOT_TOKEN: '', SVC_DATA_DIR: dataDir, SVC_LOG: 'off' },
      { role: 'all', cwd: ROOT, timeoutMs: 90_000 },
    );
    procs.push(s.proc);
    expect(readdirSync(dataDir)).toEqual(expect.arrayContaining(['pg-password', 'root-token', 'svc-processes']));
    // As root, the data dir's parent (a 0700 temp folder) is closed to the `postgres` user: the
    // cluster is then kept under /var/lib/svc/clusters and pg-location says where.
    const marker = join(dataDir, 'pg-location');
    const cluster = existsSync(marker) ? readFileSync(marker, 'utf8').trim() : join(dataDir, 'pg');
    outside.push(cluster);
    expect(existsSync(join(cluster, 'PG_VERSION'))).toBe(true);

    const busy = await svc('data', 'rm', '--data-dir', dataDir, '--yes');
    expect(busy.code).toBe(1);
    expect(busy.err.trim()).toBe(
      `svc: ${JSON.stringify(dataDir)} is in use: svc is running on it (pid ${s.proc.pid}); stop svc first`,
    );
    expect(existsSync(join(cluster, 'PG_VERSION'))).toBe(true);

    s.proc.kill('SIGTERM');
    expect(await s.proc.exited).toBe(0);
    procs.length = 0;
    const dry = await svc('data', 'rm', '--data-dir', dataDir);
    expect(dry.code).toBe(2);
    expect(dry.out).toContain(`would remove ${cluster}`);
    expect(dry.out).toContain('run again with --yes');
    expect(existsSync(dataDir)).toBe(true);

    const done = await svc('data', 'rm', '--data-dir', dataDir, '--yes');
    expect(done.code).toBe(0);
    expect(done.out).toContain(`removed ${cluster}`);
    expect(existsSync(cluster)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
  });

  test('two processes on one data dir (api and gateway): refused until both have stopped', async () => {
    const dataDir = tempDir('svc-datarm2-');
    const env = {
      DATABASE_URL: await freshDatabase('datarm'),
      SVC_DATA_DIR: dataDir,
      SVC_ROOT_TOKEN: 'rt_datarm_test',
      SVC_LOG: 'off',
    };
    const api = await spawnService(env, { role: 'api', cwd: ROOT });
    const gateway = await spawnService(env, { role: 'gateway', cwd: ROOT });
    procs.push(api.proc, gateway.proc);
    expect((await svc('data', 'rm', '--data-dir', dataDir, '--yes')).err).toMatch(
      /is in use: svc is running on it \(pid (\d+)\)/,
    );
    api.proc.kill('SIGTERM');
    await api.proc.exited;
    const still = await svc('data', 'rm', '--data-dir', dataDir, '--yes');
    expect(still.err.trim()).toBe(
      `svc: ${JSON.stringify(dataDir)} is in use: svc is running on it (pid ${gateway.proc.pid}); stop svc first`,
    );
    gateway.proc.kill('SIGTERM');
    await gateway.proc.exited;
    procs.length = 0;
    expect((await svc('data', 'rm', '--data-dir', dataDir, '--yes')).code).toBe(0);
    expect(existsSync(dataDir)).toBe(false);
  });

  test('a cluster kept outside (pg-location, as root) goes too; files svc did not make stay, and so does the folder', () => {
    const dataDir = tempDir('svc-datarm3-');
    const outside = join(tempDir('svc-cluster-'), 'c1');
    mkdirSync(outside);
    writeFileSync(join(outside, 'PG_VERSION'), '18\n');
    writeFileSync(join(dataDir, 'pg-location'), `${outside}\n`);
    writeFileSync(join(dataDir, 'root-token'), 'rt_x');
    mkdirSync(join(dataDir, 'files', 'ab'), { recursive: true });
    writeFileSync(join(dataDir, 'notes.txt'), 'mine');
    return svc('data', 'rm', '--data-dir', dataDir, '--yes').then((r) => {
      expect(r.code).toBe(0);
      expect(r.out).toContain(`removed ${outside}`);
      expect(r.out).toContain(`kept ${join(dataDir, 'notes.txt')} (not made by svc)`);
      expect(existsSync(outside)).toBe(false);
      expect(readdirSync(dataDir)).toEqual(['notes.txt']);
    });
  });

  test('refused: a folder svc did not make (even with common names such as files/, pg/, mail/ in it), a missing one, a live PostgreSQL, a pg-location that is not a cluster', async () => {
    const foreign = tempDir('svc-datarm4-');
    writeFileSync(join(foreign, 'important.doc'), 'x');
    for (const d of ['files', 'pg', 'mail', 'run']) mkdirSync(join(foreign, d));
    const r1 = await svc('data', 'rm', '--data-dir', foreign, '--yes');
    expect(r1.code).toBe(1);
    expect(r1.err).toContain('is not an svc data dir');
    expect(readdirSync(foreign).sort()).toEqual(['files', 'important.doc', 'mail', 'pg', 'run']);

    expect((await svc('data', 'rm', '--data-dir', join(foreign, 'nope'), '--yes')).err).toContain('does not exist');

    const live = tempDir('svc-datarm5-');
    writeFileSync(join(live, 'pg-password'), 'x');
    mkdirSync(join(live, 'pg'));
    writeFileSync(join(live, 'pg', 'postmaster.pid'), `${process.pid}\n/x\n`);
    expect((await svc('data', 'rm', '--data-dir', live, '--yes')).err).toContain(
      `its PostgreSQL is running (pid ${process.pid})`,
    );
    expect(existsSync(join(live, 'pg'))).toBe(true);

    const odd = tempDir('svc-datarm6-');
    writeFileSync(join(odd, 'pg-location'), `${foreign}\n`);
    expect((await svc('data', 'rm', '--data-dir', odd, '--yes')).err).toContain(
      'is not a PostgreSQL cluster; refusing',
    );
    expect(readdirSync(foreign).sort()).toEqual(['files', 'important.doc', 'mail', 'pg', 'run']);
  });

  test('fuzz: any --data-dir (NUL, lone surrogates, non-ASCII, long) is one line and an exit code, and touches nothing svc did not make', async () => {
    // Every path stays inside the sandbox (no `..`), which holds what a data dir's common names
    // look like but no file only svc writes: nothing may ever be removed from it.
    const sandbox = tempDir('svc-datarm7-');
    for (const d of ['files', 'pg', 'mail', 'svc-processes']) mkdirSync(join(sandbox, d));
    writeFileSync(join(sandbox, 'keep.txt'), 'x');
    const inside = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.constantFrom('', '.', 'pg', 'files', '\0x', '\uD800', 'é/ü', 'x'.repeat(5000)),
    );
    await fc.assert(
      fc.asyncProperty(inside, fc.boolean(), async (p, yes) => {
        const dir = `${sandbox}/${p.replace(/\.\./g, '')}`;
        const r = await svc('data', 'rm', '--data-dir', dir, ...(yes ? ['--yes'] : []));
        expect(r.code).toBe(1);
        expect(r.err.trim().split('\n')).toHaveLength(1);
        expect(readdirSync(sandbox).sort()).toEqual(['files', 'keep.txt', 'mail', 'pg', 'svc-processes']);
      }),
      { numRuns: 300 },
    );
  });

  test('/ and the home folder are never data dirs', async () => {
    // Without --yes: a dry run, which never removes anything, even if the check regressed.
    for (const dir of ['/', process.env.HOME ?? '/root']) {
      const r = await svc('data', 'rm', '--data-dir', dir);
      expect(r.code).toBe(1);
      expect(r.err).toContain('refusing to touch it');
    }
  });
});
