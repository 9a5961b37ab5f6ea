import type { Sql } from '../../store/db.ts';
import { hashSecret, newId, newSecret } from '../../ids.ts';

/**
 * Browser sessions of the hosted login (issue 16 item 4): after a login the page sets a
 * first-party cookie on the auth host (or the custom domain) holding a random token; only its
 * SHA-256 is stored. A later authorize in the same browser finds the session and skips the
 * prompt. The token rotates on every use (a copied cookie stops working once the browser has
 * used it), lives 14 days at most, and logout revokes it. Sessions are per project and per host.
 */
export const BROWSER_SESSION_DAYS = 14;
const TOKEN_RE = /^bs_[0-9a-f]{64}$/;

export const cookieName = (projectId: string) => `svc_session_${projectId.replace(/[^A-Za-z0-9_]/g, '_')}`;

export interface BrowserSession {
  id: string;
  customerId: string;
  authTime: Date;
  /** The rotated token to set in the cookie. */
  token: string;
}

/** Starts a session after a login; revokes the one the browser held for the project, if any. */
export async function startBrowserSession(
  sql: Sql,
  s: { projectId: string; customerId: string; host: string; authTime: Date; previous: string | null },
): Promise<string> {
  const token = newSecret('bs_');
  await sql.begin(async (tx) => {
    if (s.previous && TOKEN_RE.test(s.previous)) {
      await tx`update auth_browser_sessions set revoked_at = now() where token_hash = ${hashSecret(s.previous)} and project_id = ${s.projectId} and revoked_at is null`;
    }
    await tx`insert into auth_browser_sessions (id, token_hash, project_id, customer_id, host, auth_time, expires_at)
             values (${newId('bss')}, ${hashSecret(token)}, ${s.projectId}, ${s.customerId}, ${s.host}, ${s.authTime},
                     now() + make_interval(days => ${BROWSER_SESSION_DAYS}))`;
    await tx`delete from auth_browser_sessions where expires_at < now() - interval '1 day'`;
  });
  return token;
}

/**
 * The live session a cookie names (same project, same host, customer not disabled), rotated:
 * the caller sets the returned token. Null when there is none, or when it is older than
 * `maxAge` seconds (OpenID `max_age`).
 */
export async function useBrowserSession(
  sql: Sql,
  token: string | null,
  s: { projectId: string; host: string; maxAge: number | null },
): Promise<BrowserSession | null> {
  if (!token || !TOKEN_RE.test(token)) return null;
  const next = newSecret('bs_');
  const [row] = await sql<{ id: string; customer_id: string; auth_time: Date }[]>`
    update auth_browser_sessions b set token_hash = ${hashSecret(next)}, rotated_at = now()
    from customers c
    where b.token_hash = ${hashSecret(token)} and b.project_id = ${s.projectId} and b.host = ${s.host}
      and b.revoked_at is null and b.expires_at > now() and c.id = b.customer_id and c.disabled_at is null
      and (${s.maxAge}::int is null or b.auth_time > now() - make_interval(secs => ${s.maxAge}::int))
    returning b.id, b.customer_id, b.auth_time`;
  return row ? { id: row.id, customerId: row.customer_id, authTime: row.auth_time, token: next } : null;
}

/** The customer a live cookie names, without rotating it (logout checks). */
export async function peekBrowserSession(
  sql: Sql,
  token: string | null,
  projectId: string,
): Promise<{ customerId: string } | null> {
  if (!token || !TOKEN_RE.test(token)) return null;
  const [row] = await sql<{ customer_id: string }[]>`
    select customer_id from auth_browser_sessions where token_hash = ${hashSecret(token)} and project_id = ${projectId} and revoked_at is null and expires_at > now()`;
  return row ? { customerId: row.customer_id } : null;
}

/** Logout: revokes the session the cookie names; true when one was live. */
export async function endBrowserSession(sql: Sql, token: string | null, projectId: string): Promise<boolean> {
  if (!token || !TOKEN_RE.test(token)) return false;
  const rows = await sql`update auth_browser_sessions set revoked_at = now()
                         where token_hash = ${hashSecret(token)} and project_id = ${projectId} and revoked_at is null returning id`;
  return rows.length > 0;
}

/** `Set-Cookie` for the session (or, with token null, one that clears it). */
export function sessionCookie(projectId: string, token: string | null, o: { path: string; secure: boolean }): string {
  const attrs = `Path=${o.path}; HttpOnly; SameSite=Lax${o.secure ? '; Secure' : ''}`;
  return token === null
    ? `${cookieName(projectId)}=; ${attrs}; Max-Age=0`
    : `${cookieName(projectId)}=${token}; ${attrs}; Max-Age=${BROWSER_SESSION_DAYS * 86400}`;
}
