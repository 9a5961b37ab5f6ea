import type { Sql } from '../store/db.ts';
import type { Obj } from './check.ts';
import { missingEndpoints } from './validate-providers.ts';

/**
 * Storage of the "keyed" collections: one row per entry, keyed within the project, holding
 * the entry verbatim in `definition` plus the typed columns later layers query.
 */
export interface KeyedTable {
  table: 'operations' | 'hooks' | 'schedules' | 'segments' | 'auth_providers' | 'placements' | 'apps';
  /** Typed columns derived from an entry. */
  columns(entry: Obj): Record<string, unknown>;
  /**
   * `updated_at` moves only when the entry changes, not on every push that repeats it. The
   * scheduler fires a schedule that never ran only for occurrences after its `updated_at`: a push
   * repeating an unchanged schedule between an occurrence and the next tick skipped it.
   */
  touchOnChange?: boolean;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const bool = (v: unknown, dflt: boolean): boolean => (typeof v === 'boolean' ? v : dflt);

/** Joins a relative endpoint to the base URL; absolute endpoints are kept as they are. */
export function resolveEndpoint(endpoint: string, base: string | undefined): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(endpoint) || !base) return endpoint;
  return `${base.replace(/\/+$/, '')}/${endpoint.replace(/^\/+/, '')}`;
}

export function keyedTables(operationBaseUrl: string | undefined): Record<string, KeyedTable> {
  return {
    operations: {
      table: 'operations',
      columns: (e) => ({ name: str(e.name), url: resolveEndpoint(String(e.endpoint), operationBaseUrl) }),
    },
    hooks: {
      table: 'hooks',
      columns: (e) => ({
        event: e.event,
        operation_key: e.operationKey,
        model_key: str((e.filter as Obj | undefined)?.modelKey),
      }),
    },
    schedules: {
      table: 'schedules',
      columns: (e) => ({
        operation_key: e.operationKey,
        cron: e.cron,
        timezone: str(e.timezone) ?? 'UTC',
        enabled: bool(e.enabled, true),
      }),
      touchOnChange: true,
    },
    segments: { table: 'segments', columns: (e) => ({ is_active: bool(e.isActive, true) }) },
    authProviders: {
      table: 'auth_providers',
      // An oauth2 provider without an issuer or endpoints cannot log anyone in: stored, held disabled.
      columns: (e) => ({
        type: e.type,
        enabled: bool(e.enabled, true) && !(e.type === 'oauth2' && missingEndpoints(e.config as Obj | undefined)),
        is_default: bool(e.isDefault, false),
        priority: typeof e.priority === 'number' ? e.priority : 0,
      }),
    },
    placements: {
      table: 'placements',
      columns: (e) => ({ type: e.type, model_keys: Array.isArray(e.modelKeys) ? e.modelKeys : [] }),
    },
    apps: { table: 'apps', columns: (e) => ({ source: e.source }) },
  };
}

/** Stable identities for entries that have no key of their own in the spec. */
export function entryKeys(collection: string, entries: Obj[]): string[] {
  if (collection === 'placements') return entries.map((_, i) => String(i));
  if (collection === 'schedules') {
    const seen = new Map<string, number>();
    return entries.map((e) => {
      if (typeof e.key === 'string') return e.key;
      const op = String(e.operationKey);
      const n = (seen.get(op) ?? 0) + 1;
      seen.set(op, n);
      return n === 1 ? op : `${op}#${n}`;
    });
  }
  return entries.map((e) => String(e.key));
}

/**
 * Makes the table hold exactly `entries` (in order): rows whose key left the config are
 * deleted, the others upserted. With `force` every row goes first, so all are recreated.
 * Rows keyed in `keep` (entries skipped as invalid by this push) stay as they are.
 */
export async function applyKeyed(
  tx: Sql,
  projectId: string,
  spec: KeyedTable,
  keys: string[],
  entries: Obj[],
  force: boolean,
  keep: string[] = [],
): Promise<number> {
  if (force) await tx`delete from ${tx(spec.table)} where project_id = ${projectId} and not (key = any(${keep}))`;
  else
    await tx`delete from ${tx(spec.table)} where project_id = ${projectId} and not (key = any(${[...keys, ...keep]}))`;
  for (const [i, entry] of entries.entries()) {
    const row: Record<string, unknown> = {
      project_id: projectId,
      key: keys[i],
      position: i,
      definition: tx.json(entry as never),
      ...spec.columns(entry),
    };
    const cols = Object.keys(row).filter((c) => c !== 'project_id' && c !== 'key');
    // The typed columns derive from the entry alone, so an equal definition is an unchanged row.
    const touched = spec.touchOnChange
      ? tx`case when ${tx(spec.table)}.definition is distinct from excluded.definition then now() else ${tx(spec.table)}.updated_at end`
      : tx`now()`;
    await tx`insert into ${tx(spec.table)} ${tx(row as Record<string, never>)}
             on conflict (project_id, key) do update set ${tx(row as Record<string, never>, cols as never[])}, updated_at = ${touched}`;
  }
  return entries.length;
}

/** The stored definitions of a keyed table, in config order. */
export async function readKeyed(
  sql: Sql,
  projectId: string,
  table: KeyedTable['table'],
): Promise<{ key: string; definition: Obj }[]> {
  return sql<{ key: string; definition: Obj }[]>`
    select key, definition from ${sql(table)} where project_id = ${projectId} order by position, key`;
}
