import { describe, expect, test } from 'bun:test';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { alive } from '../../src/store/embedded.ts';
import { freePort } from '../../src/store/ports.ts';
import { perTestDirs } from '../support/tmp.ts';

const ROOT = join(import.meta.dir, '..', '..');
/** Each test's data dirs, removed after it. */
const tempDir = perTestDirs();

function start(env: Record<string, string | undefined>) {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...env })) if (v !== undefined) clean[k] = v;
  return Bun.spawn([process.execPath, 'src/main.ts'], { cwd: ROOT, env: clean, stdout: 'pipe', stderr: 'pipe' });
}

/**
 * Until `url` answers 200. A process that exits first, or is not healthy in time, fails the test
 * with what it printed (it is killed then).
 */
async function waitHealthy(url: string, proc: ReturnType<typeof start>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end && proc.exitCode === null) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await Bun.sleep(100);
  }
  const exited = proc.exitCode;
  if (exited === null) proc.kill('SIGKILL');
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const printed = `${out}\n${err}`.trim().split('\n').slice(-15).join('\n');
  throw new Error(`${url} never became healthy (${exited === null ? 'still running' : `exit ${exited}`}):\n${printed}`);
}

function children(pid: number): number[] {
  const out = Bun.spawnSync(['pgrep', '-P', String(pid)])
    .stdout.toString()
    .trim();
  return out ? out.split('\n').map(Number) : [];
}

describe('process lifecycle', () => {
  test('the embedded default starts both listeners, and SIGTERM leaves no PostgreSQL child behind', async () => {
    const dataDir = tempDir('svc-proc-');
    const [port, rport] = [await freePort(), await freePort()];
    const proc = start({
      DATABASE_URL: undefined,
      SVC_DATA_DIR: dataDir,
      PORT: String(port),
      REALTIME_PORT: String(rport),
      SVC_ROOT_TOKEN: undefined,
    });
    await waitHealthy(`http://127.0.0.1:${port}/health`, proc);
    expect(await (await fetch(`http://127.0.0.1:${rport}/health`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`http://127.0.0.1:${rport}/api/realtime/status`)).json()).toEqual({
      channels: 0,
      clients: 0,
    });
    const pg = children(proc.pid);
    expect(pg.length).toBeGreaterThan(0);
    // The generated root token is kept with mode 0600.
    expect(statSync(join(dataDir, 'root-token')).mode & 0o777).toBe(0o600);
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    for (const pid of pg) expect(alive(pid)).toBe(false);
    expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  }, 60_000);

  test('a second start reuses the embedded data: a tenant created before is still there', async () => {
    const dataDir = tempDir('svc-reuse-');
    const port = await freePort();
    const env = {
      DATABASE_URL: undefined,
      SVC_DATA_DIR: dataDir,
      PORT: String(port),
      REALTIME_PORT: String(await freePort()),
      SVC_ROOT_TOKEN: 'rt_reuse_test',
    };
    const first = start(env);
    await waitHealthy(`http://127.0.0.1:${port}/health`, first);
    const created = await fetch(`http://127.0.0.1:${port}/v1/control/tenants`, {
      method: 'POST',
      headers: { authorization: 'Bearer rt_reuse_test', 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'kept' }),
    });
    const { controlKey } = (await created.json()) as { controlKey: string };
    first.kill('SIGTERM');
    await first.exited;
    const second = start(env);
    await waitHealthy(`http://127.0.0.1:${port}/health`, second);
    const who = await fetch(`http://127.0.0.1:${port}/v1/control/whoami`, {
      headers: { authorization: `Bearer ${controlKey}` },
    });
    expect(who.status).toBe(200);
    expect(((await who.json()) as { role: string }).role).toBe('owner');
    second.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 60_000);

  test('an unreachable DATABASE_URL exits within 10 s with one clear line', async () => {
    const dead = await freePort();
    const t0 = Date.now();
    const proc = start({
      DATABASE_URL: `postgres://nobody@127.0.0.1:${dead}/x`,
      PORT: '0',
      REALTIME_PORT: '0',
      SVC_DATA_DIR: tempDir('svc-x-'),
    });
    const code = await proc.exited;
    const err = (await new Response(proc.stderr).text()).trim();
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(code).not.toBe(0);
    expect(err.split('\n')).toHaveLength(1);
    expect(err).toContain('cannot reach PostgreSQL');
  }, 15_000);

  test('a port in use is one clear line and a non-zero exit', async () => {
    const blocker = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response('x') });
    try {
      const proc = start({ PORT: String(blocker.port), REALTIME_PORT: '0', SVC_DATA_DIR: tempDir('svc-y-') });
      const code = await proc.exited;
      const err = (await new Response(proc.stderr).text()).trim();
      expect(code).not.toBe(0);
      expect(err.split('\n')).toHaveLength(1);
      expect(err).toContain(String(blocker.port));
    } finally {
      blocker.stop(true);
    }
  }, 30_000);

  test('a bad SVC_ROLE is refused with one line', async () => {
    const proc = start({ SVC_ROLE: 'king', SVC_DATA_DIR: tempDir('svc-z-') });
    expect(await proc.exited).toBe(2);
    expect((await new Response(proc.stderr).text()).trim()).toBe(
      'svc: SVC_ROLE must be one of all, api, gateway, worker, got "king"',
    );
  });
});
