import type { Sql } from '../store/db.ts';
import { newId } from '../ids.ts';
import { BadUserInput, Conflict, NotFound } from '../errors.ts';
import { scopeError } from '../auth/scopes.ts';
import type { Obj } from '../projects/types.ts';

/**
 * Customer roles (spec "Rules for customer roles"): matched by key within a project. A push
 * creates or updates declared roles and never touches the others.
 */
export interface CustomerRole {
  id: string;
  key: string;
  name: string;
  permissions: string[];
  isDefault: boolean;
  disabled: boolean;
}

interface RoleRow {
  id: string;
  key: string;
  name: string;
  permissions: string[];
  is_default: boolean;
  disabled_at: Date | null;
  definition: Obj;
}

const toRole = (r: RoleRow): CustomerRole => ({
  id: r.id,
  key: r.key,
  name: r.name,
  permissions: r.permissions,
  isDefault: r.is_default,
  disabled: r.disabled_at !== null,
});

const ROLE_KEY_RE = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

function checkPermissions(v: unknown): string[] {
  if (!Array.isArray(v)) throw new BadUserInput('permissions must be a list of scopes');
  for (const s of v) {
    const err = s === 'self:*' ? null : scopeError(s);
    if (err) throw new BadUserInput(`permissions: ${err}`);
  }
  return [...new Set(v as string[])];
}

/** Creates or updates one role by key (config push and `customer-roles create`). */
export async function upsertRole(tx: Sql, projectId: string, entry: Obj): Promise<CustomerRole> {
  const [row] = await tx<RoleRow[]>`
    insert into customer_roles (id, project_id, key, name, permissions, is_default, definition)
    values (${newId('crl')}, ${projectId}, ${String(entry.key)}, ${String(entry.name)}, ${entry.permissions as string[]},
            ${entry.isDefault === true}, ${tx.json(entry as never)})
    on conflict (project_id, key) do update set name = excluded.name, permissions = excluded.permissions,
      is_default = excluded.is_default, definition = excluded.definition, updated_at = now()
    returning *`;
  return toRole(row!);
}

export async function listRoles(sql: Sql, projectId: string): Promise<CustomerRole[]> {
  const rows = await sql<RoleRow[]>`select * from customer_roles where project_id = ${projectId} order by key`;
  return rows.map(toRole);
}

/** Roles as pull shows them: the pushed (or CLI-written) entry, live values on top. */
export async function readRolesForPull(sql: Sql, projectId: string): Promise<Obj[]> {
  const rows = await sql<RoleRow[]>`
    select * from customer_roles where project_id = ${projectId} and disabled_at is null order by created_at, key`;
  return rows.map((r) => {
    const out: Obj = { ...r.definition, key: r.key, name: r.name, permissions: r.permissions };
    if (r.is_default || 'isDefault' in r.definition) out.isDefault = r.is_default;
    return out;
  });
}

async function roleByKey(sql: Sql, projectId: string, key: unknown): Promise<RoleRow> {
  if (typeof key !== 'string' || key === '') throw new BadUserInput('key is required');
  const [row] = await sql<RoleRow[]>`select * from customer_roles where project_id = ${projectId} and key = ${key}`;
  if (!row) throw new NotFound('Customer role not found');
  return row;
}

export async function createRole(sql: Sql, projectId: string, input: Obj): Promise<CustomerRole> {
  if (typeof input.key !== 'string' || !ROLE_KEY_RE.test(input.key))
    throw new BadUserInput('key is required: a letter, then letters, digits, _ or -');
  if (typeof input.name !== 'string' || input.name.trim() === '') throw new BadUserInput('name is required');
  const permissions = checkPermissions(input.permissions ?? []);
  const [dup] = await sql`select 1 from customer_roles where project_id = ${projectId} and key = ${input.key}`;
  if (dup) throw new Conflict(`customer role ${input.key} already exists`);
  return upsertRole(sql, projectId, {
    key: input.key,
    name: input.name.trim(),
    permissions,
    ...(input.isDefault === true ? { isDefault: true } : {}),
  });
}

export async function updateRole(sql: Sql, projectId: string, key: unknown, patch: Obj): Promise<CustomerRole> {
  const row = await roleByKey(sql, projectId, key);
  const name = patch.name === undefined ? row.name : String(patch.name).trim();
  if (name === '') throw new BadUserInput('name must not be empty');
  const permissions = patch.permissions === undefined ? row.permissions : checkPermissions(patch.permissions);
  if (patch.isDefault !== undefined && typeof patch.isDefault !== 'boolean')
    throw new BadUserInput('isDefault must be true or false');
  const isDefault = patch.isDefault === undefined ? row.is_default : (patch.isDefault as boolean);
  const definition = { ...row.definition, name, permissions, isDefault };
  const [out] = await sql<RoleRow[]>`
    update customer_roles set name = ${name}, permissions = ${permissions}, is_default = ${isDefault},
      definition = ${sql.json(definition as never)}, updated_at = now()
    where project_id = ${projectId} and id = ${row.id} returning *`;
  return toRole(out!);
}

export async function disableRole(sql: Sql, projectId: string, key: unknown): Promise<CustomerRole> {
  const row = await roleByKey(sql, projectId, key);
  const [out] = await sql<RoleRow[]>`
    update customer_roles set disabled_at = coalesce(disabled_at, now()), updated_at = now()
    where project_id = ${projectId} and id = ${row.id} returning *`;
  return toRole(out!);
}

export interface Assignment {
  customerId: string;
  roleKey: string;
  assignedAt: string;
}

const CUSTOMER_ID_RE = /^[A-Za-z0-9_.:-]{1,200}$/;

export async function assignRole(sql: Sql, projectId: string, key: unknown, customerId: unknown): Promise<Assignment> {
  const row = await roleByKey(sql, projectId, key);
  if (row.disabled_at) throw new Conflict(`customer role ${row.key} is disabled`);
  if (typeof customerId !== 'string' || !CUSTOMER_ID_RE.test(customerId))
    throw new BadUserInput('customer is required: a customer id');
  const [a] = await sql<{ assigned_at: Date }[]>`
    insert into customer_role_assignments (project_id, customer_id, role_id) values (${projectId}, ${customerId}, ${row.id})
    on conflict (project_id, customer_id, role_id) do update set assigned_at = customer_role_assignments.assigned_at
    returning assigned_at`;
  return { customerId, roleKey: row.key, assignedAt: a!.assigned_at.toISOString() };
}

export async function revokeRole(
  sql: Sql,
  projectId: string,
  key: unknown,
  customerId: unknown,
): Promise<{ customerId: string; roleKey: string; revoked: boolean }> {
  const row = await roleByKey(sql, projectId, key);
  if (typeof customerId !== 'string' || customerId === '')
    throw new BadUserInput('customer is required: a customer id');
  const gone = await sql`delete from customer_role_assignments
                         where project_id = ${projectId} and customer_id = ${customerId} and role_id = ${row.id} returning 1`;
  return { customerId, roleKey: row.key, revoked: gone.length > 0 };
}

export async function listAssignments(
  sql: Sql,
  projectId: string,
  filter: { key?: unknown; customerId?: unknown },
): Promise<Assignment[]> {
  const roleId =
    filter.key === undefined || filter.key === '' ? null : (await roleByKey(sql, projectId, filter.key)).id;
  const customer = typeof filter.customerId === 'string' && filter.customerId !== '' ? filter.customerId : null;
  const rows = await sql<{ customer_id: string; key: string; assigned_at: Date }[]>`
    select a.customer_id, r.key, a.assigned_at
    from customer_role_assignments a join customer_roles r on r.id = a.role_id and r.project_id = a.project_id
    where a.project_id = ${projectId}
      and (${roleId}::text is null or a.role_id = ${roleId})
      and (${customer}::text is null or a.customer_id = ${customer})
    order by a.customer_id, r.key`;
  return rows.map((r) => ({ customerId: r.customer_id, roleKey: r.key, assignedAt: r.assigned_at.toISOString() }));
}
