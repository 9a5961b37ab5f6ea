import type { Sql } from '../store/db.ts';
import type { KeyPrincipal } from '../auth/principal.ts';
import type { MemberSessions } from '../auth/gate.ts';
import { fingerprintOf } from '../auth/resolve.ts';
import { BadUserInput, Unauthenticated } from '../errors.ts';
import type { ControlCaller, MemberRole } from './credentials.ts';
import { projectOfLogin, roleFor, sessionOf, type MemberLogin } from './member-sessions.ts';

/**
 * What a signed-in member may do through the public APIs (docs/studio.md, "Roles"). The Studio
 * has no API of its own for content: it calls GraphQL, /collab/info, uploads and the control
 * plane with the session, and the gate turns the session into the principal below — the
 * member's best role in the project mapped to scopes, the member id as the writer (history,
 * `userId` of events) and the `admin` principal of field access rules.
 */
const VIEWER = [
  'records:read',
  'drafts:read',
  'files:read',
  'files:list',
  'files:list.all',
  'schemas:read',
  'search:read',
  'operations:read',
  'schedules:read',
  'notifications:read',
];
const EDITOR = [
  ...VIEWER,
  'records:write',
  'records:delete',
  'records:publish',
  'files:write',
  'files:delete',
  'operations:execute',
  'schedules:write',
];

export function memberScopes(role: MemberRole): readonly string[] {
  return role === 'viewer' ? VIEWER : role === 'editor' ? EDITOR : ['*'];
}

/** One principal per (member row, project), built once; bounded. */
const principals = new Map<string, KeyPrincipal>();
const MAX_PRINCIPALS = 2000;

export async function memberPrincipal(sql: Sql, login: MemberLogin, projectId: string): Promise<KeyPrincipal> {
  const { row } = await projectOfLogin(sql, login, projectId);
  const cacheKey = `${row.memberId}\0${row.role}\0${projectId}`;
  const hit = principals.get(cacheKey);
  if (hit) return hit;
  const base = {
    kind: 'sk' as const,
    scopes: new Set(memberScopes(row.role)) as ReadonlySet<string>,
    allowedModels: null,
  };
  const p: KeyPrincipal = {
    keyId: row.memberId,
    tenantId: login.tenantId,
    projectId,
    allowedFileTypes: null,
    ...base,
    // Members see admin-only fields: never share a schema with an API key of equal scopes.
    fingerprint: `m${fingerprintOf(base)}`,
    member: { memberId: row.memberId, role: row.role },
  };
  if (principals.size >= MAX_PRINCIPALS) principals.delete(principals.keys().next().value!);
  principals.set(cacheKey, p);
  return p;
}

/**
 * The control-plane caller of a session: the row covering `projectId` (the request's
 * `X-Project-Id`) when given, else the best tenant-wide row, else the first project row.
 */
export function memberCaller(login: MemberLogin, projectId: string | null): ControlCaller {
  const row = (projectId ? roleFor(login.rows, projectId) : null) ?? roleFor(login.rows, null) ?? login.rows[0]!;
  return {
    kind: 'member',
    memberId: row.memberId,
    tenantId: login.tenantId,
    role: row.role,
    projectId: row.projectId,
    email: login.email,
  };
}

/** The gate's view of member sessions (installed by the Service). */
export function memberSessions(sql: Sql): MemberSessions {
  return {
    async principal(token, projectId) {
      const login = await sessionOf(sql, token);
      if (!login) throw new Unauthenticated(SESSION_ENDED);
      if (!projectId) throw new BadUserInput('X-Project-Id is required with a member session');
      return memberPrincipal(sql, login, projectId);
    },
  };
}

export const SESSION_ENDED = 'Authentication required: the session has ended, sign in again';

/** The control-plane caller of a session token (null: no such live session). */
export async function sessionCaller(sql: Sql, token: string, projectId: string | null): Promise<ControlCaller> {
  const login = await sessionOf(sql, token);
  if (!login) throw new Unauthenticated(SESSION_ENDED);
  return memberCaller(login, projectId);
}
