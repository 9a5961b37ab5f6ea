import { randomInt } from 'node:crypto';
import { sign, verify } from '../crypto/hmac.ts';
import type { Sql } from '../store/db.ts';
import { hashSecret, newId, newSecret } from '../ids.ts';
import { BadUserInput, NotFound, PermissionDenied, RateLimited, Unauthenticated } from '../errors.ts';
import { secretsKey, secretsKeyring } from '../secrets-key.ts';
import type { MemberRole } from './credentials.ts';

/**
 * Member sign-in (the Studio, docs/studio.md). A *login* is one (tenant, email); the member rows
 * of that email in that tenant (tenant-wide, or one per project) give its roles. A login signs
 * in with a password (set through a first-login link that `svc members add` prints) or a
 * one-time code sent by mail, and gets a server-side session: only the SHA-256 of the session
 * token is stored. Passwords are argon2id (`Bun.password`); codes are HMAC'd with the vault key,
 * single use, 10 minutes, 5 tries; 10 failed passwords lock the login for 15 minutes.
 */
export const SESSION_DAYS = 14;
const INVITE_DAYS = 7;
const CODE_MINUTES = 10;
const CODE_TRIES = 5;
const LOCK_AFTER = 10;
const LOCK_MINUTES = 15;
export const INVALID_LOGIN = 'Invalid email or password';
export const INVALID_CODE = 'Invalid or expired code';
const RANK: Record<MemberRole, number> = { viewer: 0, editor: 1, admin: 2, owner: 3 };

export interface MemberRow {
  memberId: string;
  role: MemberRole;
  /** null: the role holds for every project of the tenant. */
  projectId: string | null;
}

/** A live session: who signed in, and every member row of that login. */
export interface MemberLogin {
  sessionId: string;
  tenantId: string;
  email: string;
  rows: MemberRow[];
}

export interface SessionDeps {
  sql: Sql;
  dataDir: string;
}

export interface NewSession {
  token: string;
  sessionId: string;
  tenantId: string;
  expiresAt: Date;
}

function normalizeEmail(v: unknown): string {
  if (typeof v !== 'string' || v.length > 320 || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v.trim()))
    throw new BadUserInput('email must be an email address', { field: 'email' });
  return v.trim().toLowerCase();
}

function optionalTenant(v: unknown): string | null {
  if (v === undefined || v === null || v === '') return null;
  if (typeof v !== 'string' || v.length > 100)
    throw new BadUserInput('tenantId must be a string', { field: 'tenantId' });
  return v;
}

export function checkPassword(v: unknown, email: string): string {
  if (typeof v !== 'string' || v === '') throw new BadUserInput('password is required', { field: 'password' });
  if (v.length < 10) throw new BadUserInput('password must be at least 10 characters', { field: 'password' });
  if (v.length > 256) throw new BadUserInput('password must be at most 256 characters', { field: 'password' });
  if (new Set(v).size < 5 || v.toLowerCase() === email || v.toLowerCase().startsWith('password')) {
    throw new BadUserInput('password is too weak: use a longer, less common one', { field: 'password' });
  }
  return v;
}

/** The best role of `rows` that covers `projectId` (null: tenant-wide rows only). */
export function roleFor(rows: readonly MemberRow[], projectId: string | null): MemberRow | null {
  let best: MemberRow | null = null;
  for (const r of rows) {
    if (r.projectId !== null && r.projectId !== projectId) continue;
    if (!best || RANK[r.role] > RANK[best.role]) best = r;
  }
  return best;
}

async function openSession(sql: Sql, tenantId: string, email: string): Promise<NewSession> {
  const token = newSecret('ms_');
  const sessionId = newId('mss');
  const [row] = await sql<{ expires_at: Date }[]>`
    insert into member_sessions (id, tenant_id, email, token_hash, expires_at)
    values (${sessionId}, ${tenantId}, ${email}, ${hashSecret(token)}, now() + make_interval(days => ${SESSION_DAYS}))
    returning expires_at`;
  return { token, sessionId, tenantId, expiresAt: row!.expires_at };
}

/** A single-use first-login (or password-reset) link's secret, for a member's login. */
export async function createInvite(sql: Sql, tenantId: string, email: string): Promise<string> {
  const token = newSecret('mi_');
  await sql`insert into member_invites (token_hash, tenant_id, email, expires_at)
            values (${hashSecret(token)}, ${tenantId}, ${email.toLowerCase()}, now() + make_interval(days => ${INVITE_DAYS}))`;
  return token;
}

/** Redeems a first-login link: sets the password and signs in. */
export async function acceptInvite(
  deps: SessionDeps,
  input: { token?: unknown; password?: unknown },
): Promise<NewSession> {
  if (typeof input.token !== 'string' || !/^mi_[0-9a-f]{64}$/.test(input.token))
    throw new BadUserInput('This link is not valid', { field: 'token' });
  const token = input.token;
  const [invite] = await deps.sql<{ tenant_id: string; email: string }[]>`
    select tenant_id, email from member_invites where token_hash = ${hashSecret(token)} and used_at is null and expires_at > now()`;
  if (!invite) throw new Unauthenticated('This link has expired or was already used: ask an admin for a new one');
  const password = checkPassword(input.password, invite.email);
  const hash = await Bun.password.hash(password, { algorithm: 'argon2id' });
  const used =
    await deps.sql`update member_invites set used_at = now() where token_hash = ${hashSecret(token)} and used_at is null returning 1`;
  if (used.length === 0)
    throw new Unauthenticated('This link has expired or was already used: ask an admin for a new one');
  await deps.sql`
    insert into member_logins (tenant_id, email, password_hash) values (${invite.tenant_id}, ${invite.email}, ${hash})
    on conflict (tenant_id, email) do update set password_hash = excluded.password_hash, failed_logins = 0, locked_until = null, updated_at = now()`;
  await requireMembership(deps.sql, invite.tenant_id, invite.email);
  return openSession(deps.sql, invite.tenant_id, invite.email);
}

async function requireMembership(sql: Sql, tenantId: string, email: string): Promise<void> {
  const [m] = await sql`select 1 from members where tenant_id = ${tenantId} and email = ${email} limit 1`;
  if (!m) throw new Unauthenticated(INVALID_LOGIN);
}

let dummyHash: Promise<string> | undefined;

/** Email + password. Several tenants with this email and password: `tenantId` picks one. */
export async function loginWithPassword(
  deps: SessionDeps,
  input: { email?: unknown; password?: unknown; tenantId?: unknown },
): Promise<NewSession> {
  const email = normalizeEmail(input.email);
  if (typeof input.password !== 'string' || input.password === '' || input.password.length > 256)
    throw new BadUserInput('password is required', { field: 'password' });
  const tenant = optionalTenant(input.tenantId);
  const rows = await deps.sql<{ tenant_id: string; password_hash: string; locked: boolean }[]>`
    select l.tenant_id, l.password_hash, coalesce(l.locked_until > now(), false) as locked
    from member_logins l
    where l.email = ${email} and l.password_hash is not null and (${tenant}::text is null or l.tenant_id = ${tenant})
      and exists (select 1 from members m where m.tenant_id = l.tenant_id and m.email = l.email)
    order by l.tenant_id limit 20`;
  if (rows.length === 0) {
    // An unknown email costs what a wrong password costs.
    dummyHash ??= Bun.password.hash('svc-dummy-member-password', { algorithm: 'argon2id' });
    await Bun.password.verify(input.password, await dummyHash);
    throw new Unauthenticated(INVALID_LOGIN);
  }
  const matched: string[] = [];
  for (const r of rows) {
    if (r.locked) continue;
    if (await Bun.password.verify(input.password, r.password_hash)) matched.push(r.tenant_id);
  }
  if (matched.length === 0) {
    await deps.sql`
      update member_logins set failed_logins = failed_logins + 1,
        locked_until = case when failed_logins + 1 >= ${LOCK_AFTER} then now() + make_interval(mins => ${LOCK_MINUTES}) else locked_until end
      where email = ${email} and tenant_id in ${deps.sql(rows.map((r) => r.tenant_id))}`;
    if (rows.every((r) => r.locked))
      throw new RateLimited(`Too many failed sign-ins: try again in ${LOCK_MINUTES} minutes, or use a one-time code`);
    throw new Unauthenticated(INVALID_LOGIN);
  }
  if (matched.length > 1)
    throw new BadUserInput('This email signs in to several tenants: choose one', {
      field: 'tenantId',
      tenants: await tenantNames(deps.sql, matched),
    });
  await deps.sql`update member_logins set failed_logins = 0, locked_until = null where tenant_id = ${matched[0]!} and email = ${email}`;
  return openSession(deps.sql, matched[0]!, email);
}

async function tenantNames(sql: Sql, ids: string[]): Promise<{ id: string; name: string }[]> {
  return sql<{ id: string; name: string }[]>`select id, name from tenants where id in ${sql(ids)} order by name`;
}

const codeSigned = (tenantId: string, email: string, code: string) => `member-otp\0${tenantId}\0${email}\0${code}`;
function codeHash(dataDir: string, tenantId: string, email: string, code: string): string {
  return sign(secretsKey(dataDir), codeSigned(tenantId, email, code), 'hex');
}

/**
 * Makes a 6-digit code for each tenant this email is a member of; returns them for the caller
 * to mail (nothing for an unknown email: the answer to the browser is the same either way).
 */
export async function createLoginCodes(
  deps: SessionDeps,
  input: { email?: unknown },
): Promise<{ email: string; codes: { tenantId: string; tenantName: string; code: string }[] }> {
  const email = normalizeEmail(input.email);
  const tenants = await deps.sql<{ id: string; name: string }[]>`
    select distinct t.id, t.name from members m join tenants t on t.id = m.tenant_id where m.email = ${email} order by t.name limit 20`;
  const codes: { tenantId: string; tenantName: string; code: string }[] = [];
  for (const t of tenants) {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const [fresh] = await deps.sql`
      insert into member_codes (tenant_id, email, code_hash, expires_at)
      values (${t.id}, ${email}, ${codeHash(deps.dataDir, t.id, email, code)}, now() + make_interval(mins => ${CODE_MINUTES}))
      on conflict (tenant_id, email) do update set code_hash = excluded.code_hash, expires_at = excluded.expires_at, attempts = 0
        where member_codes.expires_at < now() + make_interval(mins => ${CODE_MINUTES - 1})
      returning 1`;
    // At most one new code a minute per login (the conflict guard above).
    if (fresh) codes.push({ tenantId: t.id, tenantName: t.name, code });
  }
  return { email, codes };
}

export async function loginWithCode(
  deps: SessionDeps,
  input: { email?: unknown; code?: unknown },
): Promise<NewSession> {
  const email = normalizeEmail(input.email);
  if (typeof input.code !== 'string' || !/^\d{6}$/.test(input.code.trim()))
    throw new BadUserInput('code must be the 6 digits from the mail', { field: 'code' });
  const code = input.code.trim();
  const rows = await deps.sql<{ tenant_id: string; code_hash: string }[]>`
    select tenant_id, code_hash from member_codes
    where email = ${email} and expires_at > now() and attempts < ${CODE_TRIES} limit 20`;
  const keyring = secretsKeyring(deps.dataDir);
  const hit = rows.find((r) => verify(keyring, codeSigned(r.tenant_id, email, code), r.code_hash, 'hex'));
  if (!hit) {
    if (rows.length)
      await deps.sql`update member_codes set attempts = attempts + 1 where email = ${email} and tenant_id in ${deps.sql(rows.map((r) => r.tenant_id))}`;
    throw new Unauthenticated(INVALID_CODE);
  }
  const used =
    await deps.sql`delete from member_codes where tenant_id = ${hit.tenant_id} and email = ${email} and code_hash = ${hit.code_hash} returning 1`;
  if (used.length === 0) throw new Unauthenticated(INVALID_CODE);
  await requireMembership(deps.sql, hit.tenant_id, email);
  return openSession(deps.sql, hit.tenant_id, email);
}

/** The live session of a token, with its member rows; null when unknown, expired or revoked. */
export async function sessionOf(sql: Sql, token: string): Promise<MemberLogin | null> {
  const rows = await sql<
    {
      id: string;
      tenant_id: string;
      email: string;
      member_id: string | null;
      role: MemberRole | null;
      project_id: string | null;
    }[]
  >`
    select s.id, s.tenant_id, s.email, m.id as member_id, m.role, m.project_id
    from member_sessions s left join members m on m.tenant_id = s.tenant_id and m.email = s.email
    where s.token_hash = ${hashSecret(token)} and s.revoked_at is null and s.expires_at > now()
    order by m.created_at`;
  const first = rows[0];
  if (!first) return null;
  const members = rows.flatMap((r) =>
    r.member_id && r.role ? [{ memberId: r.member_id, role: r.role, projectId: r.project_id }] : [],
  );
  // A login whose member rows were all removed is signed out.
  if (members.length === 0) return null;
  return { sessionId: first.id, tenantId: first.tenant_id, email: first.email, rows: members };
}

export async function revokeSession(sql: Sql, token: string): Promise<void> {
  await sql`update member_sessions set revoked_at = now() where token_hash = ${hashSecret(token)} and revoked_at is null`;
}

/** A project of the login's tenant that one of its rows covers, else NOT_FOUND (looks absent). */
export async function projectOfLogin(
  sql: Sql,
  login: MemberLogin,
  projectId: string,
): Promise<{ id: string; name: string; row: MemberRow }> {
  const row = roleFor(login.rows, projectId);
  const [p] = row
    ? await sql<
        { id: string; name: string; tenant_id: string }[]
      >`select id, name, tenant_id from projects where id = ${projectId}`
    : [];
  if (!row || !p || p.tenant_id !== login.tenantId) throw new NotFound('Project not found');
  return { id: p.id, name: p.name, row };
}

/** The projects a login may open, with the role it holds in each. */
export async function projectsOfLogin(
  sql: Sql,
  login: MemberLogin,
): Promise<{ id: string; name: string; role: MemberRole }[]> {
  const wide = roleFor(login.rows, null);
  const ids = login.rows.flatMap((r) => (r.projectId ? [r.projectId] : []));
  const rows = wide
    ? await sql<
        { id: string; name: string }[]
      >`select id, name from projects where tenant_id = ${login.tenantId} order by name, id limit 500`
    : ids.length
      ? await sql<
          { id: string; name: string }[]
        >`select id, name from projects where tenant_id = ${login.tenantId} and id in ${sql(ids)} order by name, id`
      : [];
  return rows.map((p) => ({ ...p, role: roleFor(login.rows, p.id)!.role }));
}

export function requireRole(row: MemberRow, min: MemberRole, what: string): void {
  if (RANK[row.role] < RANK[min]) throw new PermissionDenied(`This role may not ${what}`);
}
