import type { Sql } from '../store/db.ts';
import { hashSecret, newId, newSecret } from '../ids.ts';
import { Unauthenticated } from '../errors.ts';
import { INVALID_TOKEN, type TokenService } from './tokens.ts';

/**
 * Customer sessions: one per login (the `sid` claim). A session holds the scopes stamped at
 * login (spec rule 4: refresh re-stamps them; only a fresh login picks up role changes) and a
 * chain of opaque refresh tokens stored as SHA-256. Each refresh rotates the token; presenting
 * a rotated one again is reuse (RFC 9700 §4.14.2) and revokes the whole session, so a stolen
 * refresh token dies the first time either holder uses it after the other did.
 * Revocation is announced on the bus after commit; every process drops the session's access
 * tokens from then on (src/identity/tokens.ts).
 */
export const REFRESH_DAYS = 30;

export interface IssuedTokens {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  sessionId: string;
}

export interface SessionSubject {
  projectId: string;
  customerId: string;
  email: string;
  scopes: readonly string[];
  roles: readonly string[];
  ttlSeconds?: number | undefined;
}

/** Writes a session and its first refresh token (inside the caller's transaction). */
export async function insertSession(tx: Sql, s: SessionSubject): Promise<{ sessionId: string; refreshToken: string }> {
  const sessionId = newId('ses');
  const refreshToken = newSecret('rt_');
  await tx`insert into customer_sessions (id, project_id, customer_id, scopes, roles, expires_at)
           values (${sessionId}, ${s.projectId}, ${s.customerId}, ${s.scopes as string[]}, ${s.roles as string[]},
                   now() + make_interval(days => ${REFRESH_DAYS}))`;
  await tx`insert into customer_refresh_tokens (token_hash, session_id) values (${hashSecret(refreshToken)}, ${sessionId})`;
  return { sessionId, refreshToken };
}

/** The access token of a session written by insertSession (after commit). */
export async function issueTokens(
  tokens: TokenService,
  s: SessionSubject,
  row: { sessionId: string; refreshToken: string },
): Promise<IssuedTokens> {
  const access = await tokens.mint({ ...s, sessionId: row.sessionId });
  return {
    accessToken: access.token,
    refreshToken: row.refreshToken,
    expiresIn: access.expiresIn,
    sessionId: row.sessionId,
  };
}

export async function createSession(sql: Sql, tokens: TokenService, s: SessionSubject): Promise<IssuedTokens> {
  const row = await sql.begin((tx) => insertSession(tx as unknown as Sql, s));
  return issueTokens(tokens, s, row);
}

interface RefreshRow {
  session_id: string;
  rotated_at: Date | null;
  customer_id: string;
  scopes: string[];
  revoked_at: Date | null;
  expires_at: Date;
  email: string;
  disabled_at: Date | null;
}

/** Rotates a refresh token; reuse of a rotated one revokes the session. Returns the customer id too. */
export async function refreshSession(
  sql: Sql,
  tokens: TokenService,
  projectId: string,
  refreshToken: string,
  ttlSeconds?: number,
): Promise<IssuedTokens & { customerId: string }> {
  if (typeof refreshToken !== 'string' || !/^rt_[0-9a-f]{64}$/.test(refreshToken))
    throw new Unauthenticated(INVALID_TOKEN);
  const hash = hashSecret(refreshToken);
  const next = newSecret('rt_');
  const outcome = await sql.begin(async (tx) => {
    const [row] = await tx<RefreshRow[]>`
      select t.session_id, t.rotated_at, s.customer_id, s.scopes, s.revoked_at, s.expires_at, c.email, c.disabled_at
      from customer_refresh_tokens t
      join customer_sessions s on s.id = t.session_id
      join customers c on c.id = s.customer_id
      where t.token_hash = ${hash} and s.project_id = ${projectId}
      for update of t, s`;
    if (!row || row.revoked_at || row.expires_at.getTime() <= Date.now() || row.disabled_at)
      return { kind: 'invalid' as const };
    if (row.rotated_at) {
      await tx`update customer_sessions set revoked_at = now(), revoked_reason = 'refresh_token_reuse'
               where id = ${row.session_id} and revoked_at is null`;
      return { kind: 'reuse' as const, row };
    }
    await tx`update customer_refresh_tokens set rotated_at = now() where token_hash = ${hash}`;
    await tx`insert into customer_refresh_tokens (token_hash, session_id) values (${hashSecret(next)}, ${row.session_id})`;
    await tx`update customer_sessions set refreshed_at = now() where id = ${row.session_id}`;
    return { kind: 'ok' as const, row };
  });
  if (outcome.kind === 'reuse') {
    await tokens.announceRevoked({ projectId, customerId: outcome.row.customer_id, sessionId: outcome.row.session_id });
  }
  if (outcome.kind !== 'ok') throw new Unauthenticated(INVALID_TOKEN);
  const { row } = outcome;
  const access = await tokens.mint({
    projectId,
    customerId: row.customer_id,
    email: row.email,
    scopes: row.scopes,
    sessionId: row.session_id,
    ttlSeconds,
  });
  return {
    accessToken: access.token,
    refreshToken: next,
    expiresIn: access.expiresIn,
    sessionId: row.session_id,
    customerId: row.customer_id,
  };
}

/** Revokes one session (logout); true when it was live. Announces after commit. */
export async function revokeSession(
  sql: Sql,
  tokens: TokenService,
  projectId: string,
  sessionId: string,
  reason = 'logout',
): Promise<boolean> {
  const [row] = await sql<{ customer_id: string }[]>`
    update customer_sessions set revoked_at = now(), revoked_reason = ${reason}
    where id = ${sessionId} and project_id = ${projectId} and revoked_at is null returning customer_id`;
  if (!row) return false;
  await tokens.announceRevoked({ projectId, customerId: row.customer_id, sessionId });
  return true;
}

/**
 * Ends the session a bare hosted login made only to set the browser session (no party wants its
 * tokens, and none has seen them, so there is nothing to announce).
 */
export async function dropBrowserLoginSession(sql: Sql, sessionId: string): Promise<void> {
  await sql`update customer_sessions set revoked_at = now(), revoked_reason = 'browser_login' where id = ${sessionId} and revoked_at is null`;
}

/** The session a refresh token belongs to (rotated or not), within the project; null when unknown. */
export async function sessionOfRefreshToken(
  sql: Sql,
  projectId: string,
  refreshToken: string,
): Promise<{ sessionId: string; customerId: string } | null> {
  if (typeof refreshToken !== 'string' || !/^rt_[0-9a-f]{64}$/.test(refreshToken)) return null;
  const [row] = await sql<{ id: string; customer_id: string }[]>`
    select s.id, s.customer_id from customer_refresh_tokens t join customer_sessions s on s.id = t.session_id
    where t.token_hash = ${hashSecret(refreshToken)} and s.project_id = ${projectId}`;
  return row ? { sessionId: row.id, customerId: row.customer_id } : null;
}
