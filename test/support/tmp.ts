import { afterEach } from 'bun:test';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Temporary folders of the tests (config folders, data dirs, clips). Each is removed when its
 * test is done with it (`removeTempDir`, or a test server's `stop()`); whatever a failed test
 * left is removed once after the last file by the preload's global afterAll
 * (`removeAllTempDirs`), since `bun test` fires no `exit` event. The set lives on globalThis so
 * every test file's copy of this module shares it.
 */
const KEY = Symbol.for('svc.test.tempDirs');
const made: Set<string> = ((globalThis as Record<symbol, unknown>)[KEY] ??= new Set<string>()) as Set<string>;

/** A fresh folder under the OS temp dir (`TMPDIR`), named `<prefix>XXXXXX`. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  // A data dir whose embedded cluster was kept outside it (as root, under /var/lib/svc/clusters,
  // when the postgres user cannot enter a 0700 temp folder): that cluster is the test's too.
  const marker = join(dir, 'pg-location');
  if (existsSync(marker)) {
    const cluster = readFileSync(marker, 'utf8').trim();
    if (existsSync(join(cluster, 'PG_VERSION'))) rmSync(cluster, { recursive: true, force: true });
  }
  rmSync(dir, { recursive: true, force: true });
  made.delete(dir);
}

export function removeAllTempDirs(): void {
  for (const dir of made) removeTempDir(dir);
}

/**
 * For a test file's top level: a maker of folders that are removed after each test, passed or
 * failed (for folders a single test uses, such as a child process's data dir).
 */
export function perTestDirs(): (prefix: string) => string {
  const mine: string[] = [];
  afterEach(() => {
    for (const dir of mine.splice(0)) removeTempDir(dir);
  });
  return (prefix) => {
    const dir = tempDir(prefix);
    mine.push(dir);
    return dir;
  };
}
