import { readSettings } from '../../src/env.ts';
import { startServer, type Running } from '../../src/server.ts';
import type { CollabOptions } from '../../src/collab/rooms.ts';
import { freshMigratedDatabase, readUrlFor, replicaTally } from './db.ts';
import { runCli } from '../../src/cli/main.ts';
import { removeTempDir, tempDir } from './tmp.ts';
import { trackServer } from './leaks.ts';

export interface TestServer extends Running {
  apiUrl: string;
  gatewayUrl: string;
  rootToken: string;
  databaseUrl: string;
  dataDir: string;
}

/**
 * Starts the whole service in-process on ephemeral ports over a fresh database; `stop()` also
 * removes its data dir (a temporary folder). `collab`: the rooms' timings and compaction.
 */
export async function startTestServer(
  env: Record<string, string> = {},
  collab: CollabOptions = {},
): Promise<TestServer> {
  const databaseUrl = env.DATABASE_URL ?? (await freshMigratedDatabase('srv'));
  // The suite on a primary and standby (.ci/replicas): published reads from the standby, unless
  // the test names its own (an empty DATABASE_READ_URL: none).
  const readUrl = 'DATABASE_READ_URL' in env ? undefined : readUrlFor(databaseUrl);
  const dataDir = tempDir('svc-data-');
  const rootToken = `rt_test_${Math.random().toString(16).slice(2)}`;
  const settings = readSettings({
    PORT: '0',
    REALTIME_PORT: '0',
    SVC_LOG: process.env.SVC_LOG ?? 'off',
    SVC_DATA_DIR: dataDir,
    SVC_ROOT_TOKEN: rootToken,
    ...(readUrl ? { DATABASE_READ_URL: readUrl } : {}),
    ...env,
    DATABASE_URL: databaseUrl,
  });
  const running = await startServer(settings, collab);
  const stopped = trackServer(() => stop());
  const stop = async (): Promise<void> => {
    stopped();
    const replicas = readUrl ? running.svc?.replicas : undefined;
    if (replicas) {
      const t = replicaTally();
      t.services++;
      t.primary += replicas.primaryReads;
      for (const r of replicas.status()) {
        t.replica += r.reads;
        t.fallbacks += r.fallbacks;
      }
    }
    await running.stop();
    removeTempDir(dataDir);
  };
  return {
    ...running,
    stop,
    apiUrl: running.apiUrl!,
    gatewayUrl: running.gatewayUrl!,
    rootToken,
    databaseUrl,
    dataDir,
  };
}

/** Runs the CLI in-process against a server; returns exit code, stdout and stderr. */
export async function cli(
  server: { apiUrl: string },
  token: string | undefined,
  ...argv: string[]
): Promise<{ code: number; out: string; err: string; json: any }> {
  let out = '';
  let err = '';
  const code = await runCli(
    argv,
    { out: (s) => (out += s + '\n'), err: (s) => (err += s + '\n') },
    { SVC_URL: server.apiUrl, SVC_TOKEN: token },
  );
  let json: unknown;
  try {
    json = JSON.parse(out);
  } catch {
    json = undefined;
  }
  return { code, out, err, json };
}

/** A tenant, its owner's control key and one project: the usual starting point of a test. */
export async function bootstrapProject(
  server: TestServer,
  name = 'site',
): Promise<{ tenantId: string; projectId: string; ownerKey: string }> {
  const t = await cli(server, server.rootToken, 'tenants', 'create', '--name', `tenant-${name}`, '--json');
  if (t.code !== 0) throw new Error(t.err);
  const p = await cli(server, t.json.controlKey, 'projects', 'create', '--name', name, '--json');
  if (p.code !== 0) throw new Error(p.err);
  return { tenantId: t.json.tenantId, projectId: p.json.projectId, ownerKey: t.json.controlKey };
}
