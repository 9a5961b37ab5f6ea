import type { Sql } from '../store/db.ts';
import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, PermissionDenied, Unauthenticated } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Identity } from './identity.ts';
import { sendMail } from './mailer.ts';
import {
  insertSession,
  issueTokens,
  refreshSession,
  revokeSession,
  sessionOfRefreshToken,
  type IssuedTokens,
  type SessionSubject,
} from './customer-sessions.ts';
import { stampScopes } from './stamping.ts';
import { hashPassword, verifyPassword } from './passwords.ts';
import { attemptFailed, attemptSucceeded, giveBack, subjects, takeAttempt } from './login-attempts.ts';

/**
 * Customer accounts of one project (CONTRACT §8): registration, password login, refresh, logout,
 * and the session every login ends in (`openSession`). Passwords are argon2id (passwords.ts:
 * OWASP parameters, on low-priority hasher threads, bounded queue); one-time-code login is
 * customer-otp.ts. Failed logins are counted per email and per client IP (login-attempts.ts);
 * past the limit a login is RATE_LIMITED whatever the password. An unknown email and a wrong
 * password get the same answer, after the same work.
 */
export interface ProjectView {
  id: string;
  settings: Record<string, unknown>;
  models: readonly ModelDef[];
}

export interface CustomerView {
  id: string;
  email: string;
  name: string | null;
  roles: string[];
}

export interface AuthPayload extends Omit<IssuedTokens, 'sessionId'> {
  customer: CustomerView;
}

export const INVALID_LOGIN = 'Invalid email or password';
export const INVALID_CODE = 'Invalid or expired code';
const EMAIL_RE = /^[^\s@"<>(),;:\\]+@[^\s@"<>(),;:\\]+\.[^\s@"<>(),;:\\]+$/;
const COMMON = new Set([
  'password',
  'password1',
  '12345678',
  '123456789',
  '1234567890',
  'qwertyuiop',
  'qwerty123',
  'iloveyou',
  'letmein1',
  'abc12345',
  '11111111',
  '00000000',
]);

/** A boolean project setting (`customerSignupEnabled`, …), or its default. */
export const setting = (p: ProjectView, key: string, fallback: boolean): boolean =>
  typeof p.settings[key] === 'boolean' ? (p.settings[key] as boolean) : fallback;

function tokenTtl(p: ProjectView): number | undefined {
  const v = p.settings.customerAccessTokenTtlSeconds;
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function normalizeEmail(v: unknown): string {
  if (typeof v !== 'string' || v.trim() === '') throw new BadUserInput('email is required', { field: 'email' });
  const e = v.trim().toLowerCase();
  if (e.length > 254 || !EMAIL_RE.test(e))
    throw new BadUserInput('email is not a valid email address', { field: 'email' });
  return e;
}

/** Weak: under 8 characters, over 256, fewer than 5 distinct characters, or a well-known password. */
export function checkPassword(v: unknown, email: string): string {
  if (typeof v !== 'string' || v === '') throw new BadUserInput('password is required', { field: 'password' });
  if (v.length < 8) throw new BadUserInput('password must be at least 8 characters', { field: 'password' });
  if (v.length > 256) throw new BadUserInput('password must be at most 256 characters', { field: 'password' });
  if (new Set(v).size < 5 || COMMON.has(v.toLowerCase()) || v.toLowerCase() === email)
    throw new BadUserInput('password is too weak: use a longer, less common one', { field: 'password' });
  return v;
}

let dummyHash: Promise<string> | undefined;
/** Verifies against a fixed hash so an unknown email costs what a wrong password costs. */
function burnVerify(password: string): Promise<boolean> {
  // A refused attempt (hasher queue full) must not leave a rejected promise here for good.
  dummyHash ??= hashPassword('svc-dummy-password-for-timing').catch((err: unknown) => {
    dummyHash = undefined;
    throw err;
  });
  return dummyHash.then((h) => verifyPassword(password, h));
}

async function loadCustomer(
  sql: Sql,
  projectId: string,
  customerId: string,
): Promise<{ id: string; email: string; name: string | null } | null> {
  const [row] = await sql<{ id: string; email: string; name: string | null }[]>`
    select id, email, name from customers where id = ${customerId} and project_id = ${projectId} and disabled_at is null`;
  return row ?? null;
}

/** Writes a session for a customer (and, first, the customer when `create` is given) in one transaction. */
export async function openSession(
  id: Identity,
  project: ProjectView,
  customer: { id: string; email: string; name: string | null },
  create?: { passwordHash: string | null; verified: boolean },
): Promise<AuthPayload> {
  const stamp = await stampScopes(id.sql, project.id, customer.id, project.models);
  const subject: SessionSubject = {
    projectId: project.id,
    customerId: customer.id,
    email: customer.email,
    scopes: stamp.scopes,
    roles: stamp.roles,
    ttlSeconds: tokenTtl(project),
  };
  const row = await id.sql.begin(async (tx) => {
    if (create) {
      const inserted = await tx`
        insert into customers (id, project_id, email, name, password_hash, email_verified_at, last_login_at)
        values (${customer.id}, ${project.id}, ${customer.email}, ${customer.name}, ${create.passwordHash}, ${create.verified ? tx`now()` : null}, now())
        on conflict (project_id, email) do nothing returning id`;
      if (inserted.length === 0) throw new BadUserInput('email is already registered', { field: 'email' });
    } else {
      await tx`update customers set last_login_at = now() where id = ${customer.id} and project_id = ${project.id}`;
    }
    return insertSession(tx as unknown as Sql, subject);
  });
  const issued = await issueTokens(id.tokens, subject, row);
  return {
    accessToken: issued.accessToken,
    refreshToken: issued.refreshToken,
    expiresIn: issued.expiresIn,
    customer: { ...customer, roles: stamp.roles },
  };
}

/**
 * A new session for a customer who proved who they are another way: a browser session of the
 * hosted login, or an upstream provider. Null when the customer is gone or disabled.
 */
export async function loginKnownCustomer(
  id: Identity,
  project: ProjectView,
  customerId: string,
): Promise<AuthPayload | null> {
  const c = await loadCustomer(id.sql, project.id, customerId);
  return c ? openSession(id, project, c) : null;
}

export async function registerCustomer(
  id: Identity,
  project: ProjectView,
  input: { email: unknown; password: unknown; name?: unknown },
): Promise<AuthPayload> {
  if (!setting(project, 'customerSignupEnabled', true))
    throw new PermissionDenied('Customer sign-up is disabled for this project');
  if (!setting(project, 'customerPasswordEnabled', true))
    throw new PermissionDenied('Password login is disabled for this project');
  const email = normalizeEmail(input.email);
  const password = checkPassword(input.password, email);
  let name: string | null = null;
  if (input.name !== undefined && input.name !== null) {
    if (typeof input.name !== 'string' || input.name.length > 200)
      throw new BadUserInput('name must be a string of at most 200 characters', { field: 'name' });
    name = input.name.trim() || null;
  }
  const [dup] = await id.sql`select 1 from customers where project_id = ${project.id} and email = ${email}`;
  if (dup) throw new BadUserInput('email is already registered', { field: 'email' });
  const passwordHash = await hashPassword(password);
  const payload = await openSession(id, project, { id: newId('cus'), email, name }, { passwordHash, verified: false });
  if (setting(project, 'customerWelcomeEmailEnabled', true)) {
    const from = typeof project.settings.displayName === 'string' ? project.settings.displayName : undefined;
    await sendMail(id.mail, {
      projectId: project.id,
      to: email,
      list: 'welcome',
      subject: from ? `Welcome to ${from}` : 'Welcome',
      text: `Hello${name ? ` ${name}` : ''},\n\nyour account is ready.`,
      fromName: typeof project.settings.fromName === 'string' ? project.settings.fromName : from,
      replyTo: typeof project.settings.replyTo === 'string' ? project.settings.replyTo : undefined,
    }).catch((err) => console.error('welcome mail failed:', (err as Error).message));
  }
  return payload;
}

export async function loginCustomer(
  id: Identity,
  project: ProjectView,
  input: { email: unknown; password: unknown },
  ip: string | null,
): Promise<AuthPayload> {
  if (!setting(project, 'customerPasswordEnabled', true))
    throw new PermissionDenied('Password login is disabled for this project');
  const email = normalizeEmail(input.email);
  if (typeof input.password !== 'string' || input.password === '' || input.password.length > 256)
    throw new BadUserInput('password is required', { field: 'password' });
  const subs = subjects(email, ip);
  const attempt = await takeAttempt(id.sql, project.id, subs);
  let ok = false;
  let row:
    | { id: string; email: string; name: string | null; password_hash: string | null; disabled_at: Date | null }
    | undefined;
  try {
    [row] = await id.sql<
      { id: string; email: string; name: string | null; password_hash: string | null; disabled_at: Date | null }[]
    >`
      select id, email, name, password_hash, disabled_at from customers where project_id = ${project.id} and email = ${email}`;
    ok =
      row?.password_hash && !row.disabled_at
        ? await verifyPassword(input.password, row.password_hash)
        : await burnVerify(input.password).then(() => false);
  } catch (err) {
    // Not a wrong password (the hasher queue is full, the database went away): not a failure.
    await giveBack(id.sql, attempt).catch(() => {});
    throw err;
  }
  if (!ok || !row) {
    await attemptFailed(
      id.sql,
      project.id,
      subs.map((s) => s.subject),
    );
    throw new Unauthenticated(INVALID_LOGIN);
  }
  await attemptSucceeded(id.sql, project.id, email, attempt);
  return openSession(id, project, { id: row.id, email: row.email, name: row.name });
}

export async function refreshCustomerToken(
  id: Identity,
  project: ProjectView,
  input: { refreshToken: unknown },
): Promise<AuthPayload> {
  const out = await refreshSession(id.sql, id.tokens, project.id, input.refreshToken as string, tokenTtl(project));
  const customer = await currentCustomer(id.sql, project, out.customerId);
  if (!customer) throw new Unauthenticated('Invalid or expired token');
  return { accessToken: out.accessToken, refreshToken: out.refreshToken, expiresIn: out.expiresIn, customer };
}

/** Revokes the refresh token's session, else the access token's; false when there was nothing live to revoke. */
export async function logoutCustomer(
  id: Identity,
  projectId: string,
  input: { refreshToken?: unknown },
  current: { sessionId: string } | null,
): Promise<boolean> {
  if (input.refreshToken !== undefined && input.refreshToken !== null) {
    const s = await sessionOfRefreshToken(id.sql, projectId, input.refreshToken as string);
    return s ? revokeSession(id.sql, id.tokens, projectId, s.sessionId) : false;
  }
  return current ? revokeSession(id.sql, id.tokens, projectId, current.sessionId) : false;
}

export async function currentCustomer(
  sql: Sql,
  project: ProjectView,
  customerId: string,
): Promise<CustomerView | null> {
  const c = await loadCustomer(sql, project.id, customerId);
  if (!c) return null;
  const { roles } = await stampScopes(sql, project.id, customerId, project.models);
  return { ...c, roles };
}
