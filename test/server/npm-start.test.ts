import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freePort } from '../../src/store/ports.ts';
import { removeTempDir, tempDir } from '../support/tmp.ts';

/**
 * `npm start` under a process manager: SIGTERM goes to npm's PID (systemd's main PID, `docker
 * stop` to PID 1). npm passes it on to the script, which execs bun (package.json), so bun stops
 * and stops its embedded PostgreSQL. If npm dies without passing anything on (SIGKILL), bun sees
 * itself handed to another parent and stops too. Nothing may keep serving or keep running.
 */
setDefaultTimeout(120_000);
const ROOT = join(import.meta.dir, '..', '..');

/** What a test started; a failed test's processes are stopped before its data dir goes. */
let started: { pids: number[]; cluster: string; dataDir: string } | undefined;
afterEach(async () => {
  if (!started) return;
  const { pids, cluster, dataDir } = started;
  started = undefined;
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {}
  }
  await until(() => processesWith(`-D ${cluster} `).length === 0, 30_000, 'PostgreSQL to stop').catch(() => {});
  removeTempDir(dataDir);
});

/** PIDs of processes whose command line holds `text` (here: `-D <the data dir's cluster>`). */
function processesWith(text: string): number[] {
  const out = Bun.spawnSync(['ps', '-eo', 'pid=,args=']).stdout.toString();
  return out
    .split('\n')
    .filter((l) => l.includes(text))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

async function until(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(200);
  }
}

const listening = (port: number) =>
  fetch(`http://127.0.0.1:${port}/health`).then(
    () => true,
    () => false,
  );

async function npmStart(): Promise<{ npm: Bun.Subprocess; port: number; rport: number; cluster: string; bun: number }> {
  const dataDir = tempDir('svc-npm-');
  const [port, rport] = [await freePort(), await freePort()];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && k !== 'DATABASE_URL' && !k.startsWith('npm_')) env[k] = v;
  // npm's own PATH lookup finds bun in node_modules/.bin, as after `npm install`.
  Object.assign(env, {
    SVC_DATA_DIR: dataDir,
    PORT: String(port),
    REALTIME_PORT: String(rport),
    SVC_LOG: 'off',
    PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
  });
  delete env.SVC_ROOT_TOKEN;
  const npm = Bun.spawn(['npm', 'start'], { cwd: ROOT, env, stdout: 'ignore', stderr: 'pipe' });
  started = { pids: [npm.pid], cluster: join(dataDir, 'pg'), dataDir };
  await until(() => listening(port), 90_000, 'npm start to serve');
  // The cluster is in the data dir, or where its pg-location marker says (as root).
  const marker = join(dataDir, 'pg-location');
  const cluster = existsSync(marker) ? readFileSync(marker, 'utf8').trim() : join(dataDir, 'pg');
  const bun = Number(
    Bun.spawnSync(['pgrep', '-P', String(npm.pid)])
      .stdout.toString()
      .trim()
      .split('\n')[0],
  );
  // Whatever npm's child is, its children too (a shell's bun), so a failed test leaves nothing.
  const grandchildren = Bun.spawnSync(['pgrep', '-P', String(bun)])
    .stdout.toString()
    .trim()
    .split('\n')
    .filter(Boolean)
    .map(Number);
  started = { pids: [npm.pid, bun, ...grandchildren], cluster, dataDir };
  expect(processesWith(`-D ${cluster} `).length).toBe(1);
  return { npm, port, rport, cluster, bun };
}

describe('npm start under a process manager', () => {
  test("SIGTERM to npm's PID stops bun and the embedded PostgreSQL; both ports close", async () => {
    const s = await npmStart();
    // npm's child is bun itself (the script execs it), not a shell that would swallow the signal.
    expect(readFileSync(`/proc/${s.bun}/cmdline`, 'utf8').split('\0').slice(-2)).toEqual(['src/main.ts', '']);
    s.npm.kill('SIGTERM');
    await s.npm.exited;
    await until(async () => !(await listening(s.port)) && !(await listening(s.rport)), 30_000, 'the ports to close');
    await until(() => processesWith(`-D ${s.cluster} `).length === 0, 30_000, 'PostgreSQL to stop');
    await until(() => !existsSync(`/proc/${s.bun}`), 30_000, 'bun to exit');
  });

  test('npm killed outright (SIGKILL): bun notices it was orphaned and stops itself and PostgreSQL', async () => {
    const s = await npmStart();
    s.npm.kill('SIGKILL');
    await s.npm.exited;
    await until(async () => !(await listening(s.port)), 30_000, 'the API port to close');
    await until(() => processesWith(`-D ${s.cluster} `).length === 0, 30_000, 'PostgreSQL to stop');
    await until(() => !existsSync(`/proc/${s.bun}`), 30_000, 'bun to exit');
  });
});
