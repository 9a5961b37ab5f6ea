import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbedded } from '../src/store/embedded.ts';

/**
 * Runs once before the suite: with DATABASE_URL unset, the suite runs against the embedded
 * PostgreSQL the product ships, started here in a temporary folder and stopped at exit.
 */
if (!process.env.DATABASE_URL) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const server = await startEmbedded(dir);
  process.env.DATABASE_URL = server.url;
  process.env.SVC_TEST_EMBEDDED_DIR = dir;
  process.once('beforeExit', () => void server.stop());
}
