import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { ModelDef } from './types.ts';

/**
 * The models of published fleet-group versions, shared by every member project's snapshot in
 * this process: 1,000 members of one version hold one frozen array, not 1,000 copies. Versions
 * never change once published, so entries need no invalidation; the cache is bounded by
 * entries and by the JSON size of what it holds, oldest use evicted first.
 */
const MAX_ENTRIES = 256;
const MAX_BYTES = 64 * 1024 * 1024;

interface Entry {
  models: Promise<readonly ModelDef[]>;
  bytes: number;
}

const entries = new Map<string, Entry>();
let usedBytes = 0;

function evict(): void {
  while (entries.size > MAX_ENTRIES || (usedBytes > MAX_BYTES && entries.size > 1)) {
    const [k, e] = entries.entries().next().value as [string, Entry];
    entries.delete(k);
    usedBytes -= e.bytes;
  }
}

/** The frozen model list of one group version (one load per process, concurrent callers share it). */
export function fleetModels(sql: Sql, groupId: string, version: number): Promise<readonly ModelDef[]> {
  const key = `${groupId}:${version}`;
  const hit = entries.get(key);
  if (hit) {
    entries.delete(key);
    entries.set(key, hit);
    return hit.models;
  }
  const entry: Entry = { models: undefined as never, bytes: 0 };
  entry.models = (async () => {
    const [row] = await sql<{ schema: { models?: ModelDef[] }; size: number }[]>`
      select schema, octet_length(schema::text) as size from fleet_group_versions where group_id = ${groupId} and version = ${version}`;
    if (!row) throw new Error(`fleet group ${groupId} has no version ${version}`);
    const models = Object.freeze(row.schema.models ?? []);
    if (entries.get(key) === entry) {
      entry.bytes = 2 * Number(row.size);
      usedBytes += entry.bytes;
      evict();
    }
    return models;
  })();
  // A failed load is not kept: the next caller tries again.
  entry.models.catch(() => {
    if (entries.get(key) === entry) {
      entries.delete(key);
      usedBytes -= entry.bytes;
    }
  });
  entries.set(key, entry);
  evict();
  return entry.models;
}

/**
 * What identifies the GraphQL API shape of a fleet member: its group version plus its own
 * operations (they add `execute<Op>` fields). Members with equal shape keys share generated
 * schemas and compiled queries (src/graphql/schema-entries.ts).
 */
export function fleetShapeKey(
  groupId: string,
  version: number,
  operations: readonly { key: string; name: string | null; description: string | null }[],
): string {
  if (operations.length === 0) return `fleet:${groupId}:${version}`;
  const ops = createHash('sha256').update(JSON.stringify(operations)).digest('base64url').slice(0, 22);
  return `fleet:${groupId}:${version}:${ops}`;
}

/** Numbers for tests and the bench: distinct group versions held, and their estimated bytes. */
export function fleetModelStats(): { entries: number; bytes: number } {
  return { entries: entries.size, bytes: usedBytes };
}
