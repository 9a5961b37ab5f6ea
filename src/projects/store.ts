import type { Sql } from '../store/db.ts';
import type { EventBus } from '../actors/bus.ts';
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
    current.every((row, i) => row.key === models[i]!.key && JSON.stringify(row.definition) === JSON.stringify(models[i]));
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
