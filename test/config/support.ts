import { readFileSync, writeFileSync } from 'node:fs';
import { cli, type TestServer } from '../support/server.ts';
import { join } from 'node:path';
import { tempDir } from '../support/tmp.ts';

/**
 * A temporary config folder holding the given files (objects are written as JSON); removed after
 * the last test file (test/support/tmp.ts), as tests read it back after pushes and pulls.
 */
export function folder(files: Record<string, unknown>): string {
  const dir = tempDir('svc-cfg-');
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

export function read(dir: string, name: string): string {
  return readFileSync(join(dir, name), 'utf8');
}

/** A minimal valid config pinned to a project. */
export function minimal(
  pin: { projectId: string; tenantId: string },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { key: 'site', name: 'Site', project: { id: pin.projectId, tenantId: pin.tenantId }, ...extra };
}

/** `svc push --json` as `p`'s owner of a fresh config folder holding `minimal(p, extra)`: the CLI's result. */
export function pushMinimal(
  server: TestServer,
  p: { projectId: string; tenantId: string; ownerKey: string },
  extra: Record<string, unknown>,
) {
  return cli(server, p.ownerKey, 'push', '--json', '--dir', folder({ 'svc.config.json': minimal(p, extra) }));
}
