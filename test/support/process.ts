import type { Subprocess } from 'bun';
import { join } from 'node:path';
import { readUrlFor } from './db.ts';

/**
 * Waits until a spawned `src/main.ts` prints its "… ready" banner on stdout (spawned with
 * `stdout: 'pipe'`, `stderr: 'pipe'`); fails with what it printed if it exits or takes over `ms`.
 */
export async function waitForReady(
  proc: Subprocess<'ignore' | 'inherit' | 'pipe', 'pipe', 'pipe'>,
  ms = 30_000,
): Promise<void> {
  const reader = proc.stdout.getReader();
  let out = '';
  const end = Date.now() + ms;
  while (!out.includes(' ready')) {
    if (Date.now() > end) throw new Error(`process not ready: ${out}`);
    const { value, done } = await reader.read();
    if (done) throw new Error(`process exited: ${out}${await new Response(proc.stderr).text()}`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
}

/**
 * Spawns `bun src/main.ts` with `env` on fresh ports and waits for `/health` on the listener its
 * role serves (the gateway's for `gateway`). A port picked free can be taken by another process
 * before the child binds it (suites of other runs share the machine): a child that exits before
 * it is healthy is started again on new ports, up to three times. Its stderr is passed on once it
 * is healthy; with `output: 'pipe'` its stdout and stderr are left for the caller to read instead.
 */
export async function spawnService(
  env: Record<string, string>,
  opts: { role: string; cwd: string; timeoutMs?: number; output?: 'pipe' },
): Promise<{ proc: Subprocess; url: string; apiUrl: string; realtimeUrl: string }> {
  const { freePort } = await import('../../src/store/ports.ts');
  let last = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    const [port, rport] = [await freePort(), await freePort()];
    const full: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) full[k] = v;
    // As startTestServer: on the suite's primary and standby (.ci/replicas) the child reads from its database's copy.
    const readUrl = env.DATABASE_URL && !('DATABASE_READ_URL' in env) ? readUrlFor(env.DATABASE_URL) : undefined;
    if (readUrl) full.DATABASE_READ_URL = readUrl;
    Object.assign(full, env, { SVC_ROLE: opts.role, PORT: String(port), REALTIME_PORT: String(rport) });
    const proc = Bun.spawn([process.execPath, 'src/main.ts'], {
      cwd: opts.cwd,
      env: full,
      stdout: opts.output === 'pipe' ? 'pipe' : 'ignore',
      stderr: 'pipe',
    });
    const url = `http://127.0.0.1:${opts.role === 'gateway' ? rport : port}`;
    const end = Date.now() + (opts.timeoutMs ?? 30_000);
    let exited = false;
    void proc.exited.then(() => (exited = true));
    while (!exited && Date.now() < end) {
      try {
        if ((await fetch(`${url}/health`)).ok) {
          if (opts.output !== 'pipe') void new Response(proc.stderr).text().then((t) => t && process.stderr.write(t));
          return { proc, url, apiUrl: `http://127.0.0.1:${port}`, realtimeUrl: `http://127.0.0.1:${rport}` };
        }
      } catch {}
      await Bun.sleep(100);
    }
    if (!exited) {
      proc.kill('SIGKILL');
      throw new Error(`${opts.role} process never became healthy`);
    }
    last = await new Response(proc.stderr).text();
    if (!/in use/i.test(last)) break;
  }
  throw new Error(`${opts.role} process exited before it was healthy: ${last.trim().split('\n').slice(-3).join(' ')}`);
}

/** POST /graphql to a process (any of a multi-process test's): the parsed body, errors and all. */
export async function gqlAt(
  url: string,
  key: string,
  query: string,
  variables?: Record<string, unknown>,
): Promise<any> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query, variables }),
  });
  return res.json();
}

/**
 * A second `bun src/main.ts` beside a test server, on its database, data folder and root token:
 * what the multi-process tests (a write through one process seen through the other) each spawned
 * by hand. `spawnService` with SVC_READ_POOL=1 and SVC_LOG=off, then `env` over them; its stdout
 * and stderr stay piped for a test that reads them after it exits.
 */
export async function spawnBeside(
  server: { databaseUrl: string; dataDir: string; rootToken: string },
  env: Record<string, string> = {},
): Promise<{ proc: Subprocess<'ignore', 'pipe', 'pipe'>; url: string }> {
  const s = await spawnService(
    {
      DATABASE_URL: server.databaseUrl,
      SVC_DATA_DIR: server.dataDir,
      SVC_ROOT_TOKEN: server.rootToken,
      SVC_READ_POOL: '1',
      SVC_LOG: 'off',
      ...env,
    },
    { role: 'all', cwd: join(import.meta.dir, '..', '..'), output: 'pipe' },
  );
  return { proc: s.proc as Subprocess<'ignore', 'pipe', 'pipe'>, url: s.apiUrl };
}

/**
 * `spawnService` beside a test server: another process of this checkout in `role` on the server's
 * database, root token and data folder, with `env` over them (the multi-process tests' shape).
 */
export function spawnServiceBeside(
  server: { databaseUrl: string; rootToken: string; dataDir: string },
  role: string,
  env: Record<string, string> = {},
  timeoutMs?: number,
): ReturnType<typeof spawnService> {
  return spawnService(
    { DATABASE_URL: server.databaseUrl, SVC_ROOT_TOKEN: server.rootToken, SVC_DATA_DIR: server.dataDir, ...env },
    { role, cwd: join(import.meta.dir, '..', '..'), timeoutMs },
  );
}
