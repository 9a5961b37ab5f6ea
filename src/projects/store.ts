import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import type { ModelDef } from './types.ts';

/**
 * Replaces a project's model set in one statement group inside the caller's transaction and
 * bumps the project's schema version when anything changed. Returns the new version, or
 * null when the set is unchanged. Callers publish `schema.changed` after commit
 * (see `announceSchema`).
 */
export async function replaceModels(tx: Sql, projectId: string, models: readonly ModelDef[]): Promise<number | null> {
  const current = await tx<{ key: string; definition: ModelDef; position: number }[]>`
    select key, definition, position from models where project_id = ${projectId} order by position, key`;
  const same =
    current.length === models.length &&
    current.every((row, i) => row.key === models[i]!.key && canonicalJson(row.definition) === canonicalJson(models[i]));
  if (same) return null;
  await tx`delete from models where project_id = ${projectId}`;
  for (const [i, m] of models.entries()) {
    await tx`insert into models (project_id, key, position, definition)
             values (${projectId}, ${m.key}, ${i}, ${tx.json(m as never)})`;
  }
  const [row] = await tx<{ schema_version: number }[]>`
    update projects set schema_version = schema_version + 1 where id = ${projectId} returning schema_version`;
  return row!.schema_version;
}

/** Tells every process (and this one) that a project's schema moved to `version`. */
export function announceSchema(bus: EventBus, projectId: string, version: number): Promise<void> {
  return bus.publish({ type: 'schema.changed', projectId, version });
}

/** A fleet member's group and pinned version (src/fleet); null for a project outside any group. */
export interface FleetMembership {
  groupId: string;
  groupKey: string;
  groupName: string;
  version: number;
  models: ModelDef[];
}

export async function fleetMembershipOf(sql: Sql, projectId: string): Promise<FleetMembership | null> {
  const [row] = await sql<
    { id: string; key: string; name: string; version: number; schema: { models?: ModelDef[] } }[]
  >`
    select g.id, g.key, g.name, v.version, v.schema
    from projects p
    join fleet_groups g on g.id = p.fleet_group_id
    join fleet_group_versions v on v.group_id = g.id and v.version = p.fleet_schema_version
    where p.id = ${projectId}`;
  return row
    ? { groupId: row.id, groupKey: row.key, groupName: row.name, version: row.version, models: row.schema.models ?? [] }
    : null;
}

/** The sentence a member project's model change is refused with (svc push), naming the group. */
export function fleetModelsRefusal(projectId: string, m: FleetMembership): string {
  return `project ${projectId} is a member of fleet group "${m.groupKey}" (${m.groupName}): its models are the group's published schema (version ${m.version}) and cannot be changed by svc push; publish model changes with svc fleet-groups publish --group ${m.groupKey}`;
}

/** JSON with object keys sorted: jsonb does not keep key order, so stored and given values compare by this. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}
