import type { BusEvent, EventBus } from '../bus/bus.ts';
import type { Sql } from '../store/db.ts';
import { newId } from '../ids.ts';
import { BadUserInput, PermissionDenied } from '../errors.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { checkName, requireMember } from '../control/tenancy.ts';
import { validateConfig } from '../config/validate.ts';
import type { ModelDef } from '../projects/types.ts';
import { canonicalJson } from '../projects/store.ts';

/**
 * Fleet groups (spec "Fleet group"; CONTRACT §3 `svc fleet-groups`): a tenant's centrally
 * managed schema. `publishGroup` stores a new immutable version and moves every member project
 * to it in the same transaction; `fleet.published` on the bus then reloads the members' actors
 * in every process. A group is named by its key, unique per tenant.
 */
export interface FleetDeps {
  sql: Sql;
  bus: EventBus;
}

export interface PublishResult {
  groupId: string;
  schemaVersion: string;
  projects: number;
}

export interface GroupView {
  groupId: string;
  name: string;
  schemaVersion: string;
  projects: number;
}

export const GROUP_KEY_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;
const MAX_ERRORS_SHOWN = 5;

export function checkGroupKey(value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new BadUserInput('group is required');
  if (!GROUP_KEY_RE.test(value))
    throw new BadUserInput('group must be 1–63 letters, digits, "_" or "-", starting with a letter or digit');
  return value;
}

/** Owners and tenant-wide admins manage fleet groups (they span the tenant's projects). */
function requireFleetManager(caller: ControlCaller): Extract<ControlCaller, { kind: 'member' }> {
  const member = requireMember(caller);
  if (!(member.role === 'owner' || (member.role === 'admin' && member.projectId === null))) {
    throw new PermissionDenied('Only owners and tenant-wide admins may publish fleet group schemas');
  }
  return member;
}

/** The models of a publish body: `config` is a config folder's content (only `models` is used). */
export function groupModels(config: unknown): ModelDef[] {
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw new BadUserInput('config must be an object holding models');
  const models = (config as { models?: unknown }).models;
  if (!Array.isArray(models)) throw new BadUserInput('the config has no models: a fleet group schema is its models');
  // The same rules as `svc push` (lookups, select targets, references between models).
  const { errors } = validateConfig({ key: 'fleet-group', name: 'fleet group', models });
  if (errors.length > 0) {
    const shown = errors
      .slice(0, MAX_ERRORS_SHOWN)
      .map((e) => `${e.path}: ${e.message}`)
      .join('; ');
    throw new BadUserInput(
      `the models are not valid: ${shown}${errors.length > MAX_ERRORS_SHOWN ? ` (and ${errors.length - MAX_ERRORS_SHOWN} more)` : ''}`,
      { errors },
    );
  }
  return models as ModelDef[];
}

/**
 * Publishes `config.models` as group `key`'s schema (creating the group on first publish). An
 * unchanged model set publishes nothing and answers the current version. Members move with it.
 */
export async function publishGroup(
  deps: FleetDeps,
  caller: ControlCaller,
  key: unknown,
  input: { name?: unknown; config?: unknown },
): Promise<PublishResult> {
  const member = requireFleetManager(caller);
  const groupKey = checkGroupKey(key);
  const name = input.name === undefined || input.name === null || input.name === '' ? null : checkName(input.name);
  const models = groupModels(input.config);
  const events: BusEvent[] = [];
  const out = await deps.sql.begin(async (txRaw) => {
    const tx = txRaw as unknown as Sql;
    await tx`insert into fleet_groups (id, tenant_id, key, name) values (${newId('fg')}, ${member.tenantId}, ${groupKey}, ${name ?? groupKey})
             on conflict (tenant_id, key) do nothing`;
    // The row lock serialises publishes of one group and orders them against joins (provisioning).
    const [group] = await tx<{ id: string; schema_version: number }[]>`
      select id, schema_version from fleet_groups where tenant_id = ${member.tenantId} and key = ${groupKey} for update`;
    const g = group!;
    if (name !== null) await tx`update fleet_groups set name = ${name} where id = ${g.id}`;
    if (g.schema_version > 0) {
      const [current] = await tx<{ schema: { models: ModelDef[] } }[]>`
        select schema from fleet_group_versions where group_id = ${g.id} and version = ${g.schema_version}`;
      if (current && canonicalJson(current.schema.models) === canonicalJson(models)) {
        const [n] = await tx<{ n: number }[]>`select count(*)::int as n from projects where fleet_group_id = ${g.id}`;
        return { groupId: groupKey, schemaVersion: String(g.schema_version), projects: n!.n };
      }
    }
    const version = g.schema_version + 1;
    const schema = { models };
    await tx`insert into fleet_group_versions (group_id, version, schema, published_by)
             values (${g.id}, ${version}, ${tx.json(schema as never)}, ${member.memberId})`;
    await tx`update fleet_groups set schema_version = ${version}, published_schema = ${tx.json(schema as never)}, updated_at = now() where id = ${g.id}`;
    // Every member moves in this transaction; schema_version (per project) moves so caches drop.
    const moved = await tx`update projects set fleet_schema_version = ${version}, schema_version = schema_version + 1
                           where fleet_group_id = ${g.id} returning id`;
    events.push({ type: 'fleet.published', groupId: g.id, version });
    await deps.bus.stage((text, params) => tx.unsafe(text, params as never[]) as unknown as Promise<unknown[]>, events);
    return { groupId: groupKey, schemaVersion: String(version), projects: moved.length };
  });
  deps.bus.deliverLocal(events);
  return out;
}

/** The caller's tenant's groups (any member of the tenant may list them). */
export async function listGroups(sql: Sql, caller: ControlCaller): Promise<{ groups: GroupView[] }> {
  const member = requireMember(caller);
  const rows = await sql<{ key: string; name: string; schema_version: number; projects: number }[]>`
    select g.key, g.name, g.schema_version, (select count(*)::int from projects p where p.fleet_group_id = g.id) as projects
    from fleet_groups g where g.tenant_id = ${member.tenantId} order by g.key`;
  return {
    groups: rows.map((r) => ({
      groupId: r.key,
      name: r.name,
      schemaVersion: String(r.schema_version),
      projects: r.projects,
    })),
  };
}

/** A group of `tenantId` by key, or null: another tenant's group is indistinguishable from none. */
export async function groupOfTenant(
  sql: Sql,
  tenantId: string,
  key: string,
): Promise<{ id: string; key: string; schemaVersion: number } | null> {
  const [row] = await sql<{ id: string; key: string; schema_version: number }[]>`
    select id, key, schema_version from fleet_groups where tenant_id = ${tenantId} and key = ${key}`;
  return row && row.schema_version > 0 ? { id: row.id, key: row.key, schemaVersion: row.schema_version } : null;
}
