import { join } from 'node:path';
import { freePort } from '../../src/store/ports.ts';
import type { TestServer } from '../support/server.ts';

const ROOT = join(import.meta.dir, '..', '..');

/** A second svc process (`bun src/main.ts`) on the same database and data folder (same vault key). */
export async function spawnPeer(
  server: TestServer,
  extraEnv: Record<string, string> = {},
): Promise<{ apiUrl: string; stop(): Promise<void> }> {
  const [port, rport] = [await freePort(), await freePort()];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  Object.assign(env, {
    DATABASE_URL: server.databaseUrl,
    SVC_DATA_DIR: server.dataDir,
    SVC_ROOT_TOKEN: server.rootToken,
    PORT: String(port),
    REALTIME_PORT: String(rport),
    SVC_ROLE: 'api',
    ...extraEnv,
  });
  const proc = Bun.spawn([process.execPath, 'src/main.ts'], { cwd: ROOT, env, stdout: 'ignore', stderr: 'inherit' });
  const apiUrl = `http://127.0.0.1:${port}`;
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${apiUrl}/health`)).ok) break;
    } catch {}
    if (Date.now() > end) {
      proc.kill();
      throw new Error('peer process never became healthy');
    }
    await Bun.sleep(100);
  }
  return {
    apiUrl,
    async stop() {
      proc.kill('SIGTERM');
      await proc.exited;
    },
  };
}
