import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A temporary config folder holding the given files (objects are written as JSON). */
export function folder(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-cfg-'));
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

export function read(dir: string, name: string): string {
  return readFileSync(join(dir, name), 'utf8');
}

/** A minimal valid config pinned to a project. */
export function minimal(pin: { projectId: string; tenantId: string }, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { key: 'site', name: 'Site', project: { id: pin.projectId, tenantId: pin.tenantId }, ...extra };
}
