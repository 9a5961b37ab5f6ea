import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'bun:test';
import { startEmbedded } from '../src/store/embedded.ts';
import { dropCreatedDatabases } from './support/db.ts';
import { removeAllTempDirs } from './support/tmp.ts';

/**
 * Runs once before the suite: with DATABASE_URL unset, the suite runs against the embedded
 * PostgreSQL the product ships, started here in a temporary folder. `bun test` fires neither
 * `beforeExit` nor `exit`, but a global `afterAll` in a preload runs once after the last file:
 * the server is stopped and its folder removed there. If the runner dies before (kill -9, a
 * crash), the server's watchdog stops it and removes the folder.
 */
// Temporary folders a test did not remove itself (it failed before its cleanup) go at the end.
afterAll(() => removeAllTempDirs());

// One log line per request would bury the test output; the request-log tests turn it on.
process.env.SVC_LOG ??= 'off';

if (process.env.DATABASE_URL) {
  // A shared server: the suite's own databases go when it is over (~80 DROP DATABASE … WITH
  // (FORCE); on a loaded shared server that took over two minutes).
  afterAll(() => dropCreatedDatabases(), 600_000);
} else {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const server = await startEmbedded(dir, { throwaway: dir });
  process.env.DATABASE_URL = server.url;
  process.env.SVC_TEST_EMBEDDED_DIR = dir;
  afterAll(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);
}
