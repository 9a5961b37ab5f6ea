import type { Sql } from '../store/db.ts';
import { hashSecret, newId, newSecret } from '../ids.ts';
import { BadUserInput, NotFound, PermissionDenied } from '../errors.ts';
import { MEMBER_ROLES, roleHas, type ControlCaller, type ControlPermission, type MemberRole } from './credentials.ts';

/** Tenants, projects and members: the control plane's own records. */

export function checkName(value: unknown, what = 'name'): string {
  if (typeof value !== 'string' || value.trim() === '') throw new BadUserInput(`${what} is required`);
  const name = value.trim();
  if (name.length > 200) throw new BadUserInput(`${what} must be at most 200 characters`);
  return name;
}

function checkEmail(value: unknown): string {
  if (typeof value !== 'string' || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value) || value.length > 320) {
    throw new BadUserInput('email must be an email address');
  }
  return value.toLowerCase();
}

async function insertMember(
  sql: Sql,
  tenantId: string,
  email: string,
  role: MemberRole,
  projectId: string | null,
): Promise<{ memberId: string; controlKey: string }> {
  const memberId = newId('mem');
  const controlKey = newSecret('ck_');
  await sql`insert into members (id, tenant_id, project_id, email, role)
            values (${memberId}, ${tenantId}, ${projectId}, ${email}, ${role})`;
  await sql`insert into control_keys (id, member_id, key_hash)
            values (${newId('ckid')}, ${memberId}, ${hashSecret(controlKey)})`;
  return { memberId, controlKey };
}

export async function createTenant(
  sql: Sql,
  caller: ControlCaller,
  input: { name?: unknown; ownerEmail?: unknown },
): Promise<{ tenantId: string; memberId: string; controlKey: string }> {
  if (caller.kind !== 'root') throw new PermissionDenied('Only the root token may create tenants');
  const name = checkName(input.name);
  const email =
    input.ownerEmail === undefined || input.ownerEmail === null
      ? 'owner@localhost.invalid'
      : checkEmail(input.ownerEmail);
  const tenantId = newId('ten');
  return sql.begin(async (tx) => {
    await tx`insert into tenants (id, name) values (${tenantId}, ${name})`;
    const owner = await insertMember(tx as unknown as Sql, tenantId, email, 'owner', null);
    return { tenantId, ...owner };
  });
}

/** Whether a member may act with `perm` on `projectId` (null: tenant-wide action). */
export function memberMay(caller: ControlCaller, perm: ControlPermission, projectId: string | null): boolean {
  if (caller.kind !== 'member') return false;
  if (!roleHas(caller.role, perm)) return false;
  return caller.projectId === null || caller.projectId === projectId;
}

export function requireMember(caller: ControlCaller): Extract<ControlCaller, { kind: 'member' }> {
  if (caller.kind !== 'member')
    throw new PermissionDenied('This command needs a control key (ck_…), not the root token');
  return caller;
}

export async function createProject(
  sql: Sql,
  caller: ControlCaller,
  input: { name?: unknown },
): Promise<{ projectId: string; tenantId: string }> {
  const member = requireMember(caller);
  if (!memberMay(member, 'projects:create', null))
    throw new PermissionDenied('Only a tenant owner may create projects');
  const name = checkName(input.name);
  const projectId = newId('prj');
  await sql`insert into projects (id, tenant_id, name) values (${projectId}, ${member.tenantId}, ${name})`;
  return { projectId, tenantId: member.tenantId };
}

/** Loads a project of the caller's tenant, or fails as if it did not exist. */
/** The ids of a tenant's projects. */
export async function projectIdsOfTenant(sql: Sql, tenantId: string): Promise<string[]> {
  const rows = await sql<{ id: string }[]>`select id from projects where tenant_id = ${tenantId}`;
  return rows.map((r) => r.id);
}

/** A tenant's display name, or null for an unknown id. */
export async function tenantName(sql: Sql, tenantId: string): Promise<string | null> {
  const [row] = await sql<{ name: string }[]>`select name from tenants where id = ${tenantId}`;
  return row?.name ?? null;
}

/**
 * The emails of a tenant's members among `userIds` (a record history's writers: member ids,
 * key ids, null), by member id. Ids of other tenants' members and anything not a member id are
 * left out.
 */
export async function memberEmails(
  sql: Sql,
  tenantId: string,
  userIds: readonly (string | null)[],
): Promise<Map<string, string>> {
  const ids = [...new Set(userIds.filter((u): u is string => typeof u === 'string' && u.startsWith('mem_')))];
  if (ids.length === 0) return new Map();
  const rows = await sql<
    { id: string; email: string }[]
  >`select id, email from members where tenant_id = ${tenantId} and id = any(${ids})`;
  return new Map(rows.map((r) => [r.id, r.email]));
}

export async function projectOfCaller(
  sql: Sql,
  caller: ControlCaller,
  projectId: unknown,
): Promise<{ id: string; tenantId: string }> {
  const member = requireMember(caller);
  if (typeof projectId !== 'string' || projectId === '') throw new BadUserInput('project is required');
  const [row] = await sql<
    { id: string; tenant_id: string }[]
  >`select id, tenant_id from projects where id = ${projectId}`;
  // Another tenant's project looks absent: its existence is not the caller's to learn.
  if (!row || row.tenant_id !== member.tenantId) throw new NotFound('Project not found');
  return { id: row.id, tenantId: row.tenant_id };
}

export async function addMember(
  sql: Sql,
  caller: ControlCaller,
  input: { email?: unknown; role?: unknown; project?: unknown },
): Promise<{ memberId: string; controlKey: string }> {
  const member = requireMember(caller);
  const email = checkEmail(input.email);
  const role = input.role as MemberRole;
  if (!MEMBER_ROLES.includes(role)) throw new BadUserInput(`role must be one of ${MEMBER_ROLES.join(', ')}`);
  let projectId: string | null = null;
  if (input.project !== undefined && input.project !== null && input.project !== '') {
    projectId = (await projectOfCaller(sql, caller, input.project)).id;
  }
  if (role === 'owner' && projectId !== null) throw new BadUserInput('an owner is tenant-wide: leave out --project');
  if (!memberMay(member, 'members:add', projectId))
    throw new PermissionDenied('Only owners and admins may add members');
  if (role === 'owner' && member.role !== 'owner') throw new PermissionDenied('Only an owner may add another owner');
  return insertMember(sql, member.tenantId, email, role, projectId);
}
