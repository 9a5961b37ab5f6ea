import { readFileSync, writeFileSync } from 'node:fs';
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
