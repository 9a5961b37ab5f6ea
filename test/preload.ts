import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'bun:test';
import { startEmbedded } from '../src/store/embedded.ts';
import { dropCreatedDatabases, READ_SERVER_ENV, replicaTally } from './support/db.ts';
import { removeAllTempDirs } from './support/tmp.ts';
import { stopLeakedServers } from './support/leaks.ts';

/**
 * Runs once before the suite: with DATABASE_URL unset, the suite runs against the embedded
 * PostgreSQL the product ships, started here in a temporary folder. `bun test` fires neither
 * `beforeExit` nor `exit`, but a global `afterAll` in a preload runs once after the last file:
 * the server is stopped and its folder removed there. If the runner dies before (kill -9, a
 * crash), the server's watchdog stops it and removes the folder.
 */
// Temporary folders a test did not remove itself (it failed before its cleanup) go at the end.
afterAll(() => removeAllTempDirs());

/**
 * Test servers a file left running are stopped before the suite's database goes, and named: a
 * file that passed must stop what it started.
 */
async function stopLeaks(): Promise<void> {
  const files = await stopLeakedServers();
  if (files.length) console.error(`test servers left running, stopped after the last file: ${files.join(', ')}`);
}

// One log line per request would bury the test output; the request-log tests turn it on.
process.env.SVC_LOG ??= 'off';

// DATABASE_READ_URL: a hot standby of the DATABASE_URL server (.ci/replicas). Services the tests
// start read from their database's copy on it (support/db.ts readUrlFor); the variable itself
// names the standby's `postgres` database, so child processes must not inherit it as it is.
if (process.env.DATABASE_READ_URL) {
  if (!process.env.DATABASE_URL) throw new Error('DATABASE_READ_URL needs DATABASE_URL (its primary) for the suite');
  process.env[READ_SERVER_ENV] = process.env.DATABASE_READ_URL;
  delete process.env.DATABASE_READ_URL;
  // Where the in-process services' published reads went: a run that never read from the standby
  // (it was never up, or the routing broke) would pass while proving nothing.
  if (process.env.SVC_TEST_REPLICA_SUMMARY)
    afterAll(() => {
      const t = replicaTally();
      console.log(
        `replicas: ${t.services} services stopped; published reads: ${t.replica} on the standby, ${t.primary} on the primary, ${t.fallbacks} fell back after failing on the standby`,
      );
      if (t.services > 0 && t.replica === 0) throw new Error('replica mode: the standby answered no published read');
    });
}

if (process.env.DATABASE_URL) {
  // A shared server: the suite's own databases go when it is over (~80 DROP DATABASE … WITH
  // (FORCE); on a loaded shared server that took over two minutes).
  afterAll(async () => {
    await stopLeaks();
    await dropCreatedDatabases();
  }, 600_000);
} else {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const server = await startEmbedded(dir, { throwaway: dir });
  process.env.DATABASE_URL = server.url;
  process.env.SVC_TEST_EMBEDDED_DIR = dir;
  afterAll(async () => {
    await stopLeaks();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
}
