import type { Sql } from '../store/db.ts';
import { hashSecret } from '../ids.ts';
import { Unauthenticated } from '../errors.ts';

/** Who is calling the control plane. */
export type ControlCaller =
  | { kind: 'root' }
  | {
      kind: 'member';
      memberId: string;
      tenantId: string;
      role: MemberRole;
      /** null: the role holds for every project of the tenant. */
      projectId: string | null;
      email: string;
    };

export type MemberRole = 'owner' | 'admin' | 'editor' | 'viewer';
export const MEMBER_ROLES: readonly MemberRole[] = ['owner', 'admin', 'editor', 'viewer'];

export type ControlPermission =
  | 'tenants:create'
  | 'projects:create'
  | 'members:add'
  | 'config:push'
  | 'config:read'
  | 'domains:write'
  | 'relyingparties:write'
  | 'keys:write'
  | 'records:write';

const ROLE_PERMISSIONS: Record<MemberRole, readonly ControlPermission[]> = {
  owner: [
    'projects:create',
    'members:add',
    'config:push',
    'config:read',
    'domains:write',
    'relyingparties:write',
    'keys:write',
    'records:write',
  ],
  admin: [
    'members:add',
    'config:push',
    'config:read',
    'domains:write',
    'relyingparties:write',
    'keys:write',
    'records:write',
  ],
  editor: ['config:push', 'config:read', 'records:write'],
  viewer: ['config:read'],
};

export function roleHas(role: MemberRole, perm: ControlPermission): boolean {
  return ROLE_PERMISSIONS[role].includes(perm);
}

/** Resolves `Authorization: Bearer …` to the root operator or a member's control key. */
export async function authenticateControl(
  sql: Sql,
  rootTokenHash: string,
  authorization: string | null | undefined,
): Promise<ControlCaller> {
  const m = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
  if (!m) throw new Unauthenticated('Authentication required: send Authorization: Bearer <root token or control key>');
  const token = m[1]!;
  if (hashSecret(token) === rootTokenHash) return { kind: 'root' };
  if (!token.startsWith('ck_')) throw new Unauthenticated('Authentication required: the token is not valid');
  const [row] = await sql<
    { id: string; tenant_id: string; role: MemberRole; project_id: string | null; email: string }[]
  >`
    select m.id, m.tenant_id, m.role, m.project_id, m.email
    from control_keys k join members m on m.id = k.member_id
    where k.key_hash = ${hashSecret(token)} and k.disabled_at is null`;
  if (!row) throw new Unauthenticated('Authentication required: the control key is not valid');
  return {
    kind: 'member',
    memberId: row.id,
    tenantId: row.tenant_id,
    role: row.role,
    projectId: row.project_id,
    email: row.email,
  };
}
