import { SignJWT } from 'jose';
import type { Sql } from '../../store/db.ts';
import { hashSecret, newSecret } from '../../ids.ts';
import { refreshSession, revokeSession } from '../customer-sessions.ts';
import type { TokenService } from '../tokens.ts';
import { ALG } from '../token-signing-keys.ts';
import { Unauthenticated } from '../../errors.ts';
import {
  CODE_SECONDS,
  ID_TOKEN_SECONDS,
  scopedClaims,
  verifierMatches,
  wireClientId,
  type AuthorizeRequest,
} from './protocol.ts';

/**
 * Authorization codes of the hosted login and their exchange. The hosted page logs the customer
 * in with the accounts module (same sessions, throttling and role stamping as GraphQL login);
 * the session's first refresh token is dropped there and a fresh one is written when the code
 * is exchanged, so nothing usable exists before the exchange.
 */
export interface CodeGrant {
  projectId: string;
  clientId: string;
  request: AuthorizeRequest;
  customerId: string;
  sessionId: string;
  /** Refresh token created by the login; dropped here. */
  loginRefreshToken: string;
  /** The party's allowedScopes: the session's stamped scopes are narrowed to them. */
  allowedScopes: string[] | null;
  /** The issuer the login happened under (the deployment's or a custom domain's). */
  issuer: string;
  /** When the customer last authenticated (a browser session's login time, or now). */
  authTime: Date;
}

/** What the userinfo endpoint releases about a session, or null (unknown, other project, customer disabled). */
export interface UserinfoRow {
  oidc_scopes: string[] | null;
  oidc_issuer: string | null;
  email: string;
  name: string | null;
  email_verified_at: Date | null;
  /** The origins of the party the session was issued to (CORS for browser apps). */
  allowed_origins: string[] | null;
}

export async function userinfoOf(sql: Sql, projectId: string, sessionId: string): Promise<UserinfoRow | null> {
  const [s] = await sql<UserinfoRow[]>`
    select s.oidc_scopes, s.oidc_issuer, c.email, c.name, c.email_verified_at, r.allowed_origins
    from customer_sessions s join customers c on c.id = s.customer_id
    left join relying_parties r on r.project_id = s.project_id and r.key = s.oidc_client_id
    where s.id = ${sessionId} and s.project_id = ${projectId} and c.disabled_at is null`;
  return s ?? null;
}

export async function issueCode(sql: Sql, g: CodeGrant): Promise<string> {
  const code = newSecret('ac_');
  await sql.begin(async (tx) => {
    await tx`delete from customer_refresh_tokens where token_hash = ${hashSecret(g.loginRefreshToken)}`;
    if (g.allowedScopes) {
      await tx`update customer_sessions set scopes = array(select unnest(scopes) intersect select unnest(${g.allowedScopes}::text[]))
               where id = ${g.sessionId}`;
    }
    await tx`insert into oauth_codes (code_hash, project_id, client_id, redirect_uri, code_challenge, nonce, scopes, customer_id, session_id, issuer, auth_time, expires_at)
             values (${hashSecret(code)}, ${g.projectId}, ${g.clientId}, ${g.request.redirect_uri}, ${g.request.code_challenge},
                     ${g.request.nonce}, ${g.request.scopes}, ${g.customerId}, ${g.sessionId}, ${g.issuer}, ${g.authTime}, now() + make_interval(secs => ${CODE_SECONDS}))`;
    await tx`delete from oauth_codes where expires_at < now() - interval '1 hour'`;
  });
  return code;
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
  id_token?: string;
}

export type ExchangeResult = { ok: true; body: TokenResponse } | { ok: false; error: string; description: string };

interface CodeRow {
  project_id: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  nonce: string | null;
  scopes: string[];
  customer_id: string;
  session_id: string;
  issuer: string | null;
  auth_time: Date;
  expires_at: Date;
  used_at: Date | null;
  email: string;
  name: string | null;
  email_verified_at: Date | null;
  session_scopes: string[];
  revoked_at: Date | null;
}

const INVALID_GRANT =
  'The authorization code is invalid, expired, already used, or was issued to another client or redirect URI';

/** RFC 6749 §4.1.3 with RFC 7636 §4.6. Every mismatch is the same invalid_grant (no oracle). */
export async function exchangeCode(
  sql: Sql,
  tokens: TokenService,
  input: {
    projectId: string;
    clientId: string;
    code: unknown;
    redirectUri: unknown;
    verifier: unknown;
    issuer: string;
    ttlSeconds?: number | undefined;
  },
  // `issuer` is the site the token endpoint was called on: a code is exchanged where it was issued.
): Promise<ExchangeResult> {
  if (typeof input.code !== 'string' || !/^ac_[0-9a-f]{64}$/.test(input.code))
    return { ok: false, error: 'invalid_grant', description: INVALID_GRANT };
  const hash = hashSecret(input.code);
  const outcome = await sql.begin(async (tx) => {
    const [row] = await tx<CodeRow[]>`
      select o.*, c.email, c.name, c.email_verified_at, s.scopes as session_scopes, s.revoked_at
      from oauth_codes o join customers c on c.id = o.customer_id join customer_sessions s on s.id = o.session_id
      where o.code_hash = ${hash} for update of o`;
    if (!row) return { kind: 'invalid' as const };
    if (row.used_at) return { kind: 'replay' as const, row };
    // A code is spent by any presentation, right or wrong: a guessed verifier gets one try.
    await tx`update oauth_codes set used_at = now() where code_hash = ${hash}`;
    if (
      row.expires_at.getTime() <= Date.now() ||
      row.project_id !== input.projectId ||
      row.client_id !== input.clientId ||
      row.redirect_uri !== input.redirectUri ||
      !verifierMatches(input.verifier, row.code_challenge) ||
      row.revoked_at ||
      (row.issuer ?? input.issuer) !== input.issuer
    ) {
      return { kind: 'spent' as const, row };
    }
    const refreshToken = newSecret('rt_');
    await tx`insert into customer_refresh_tokens (token_hash, session_id) values (${hashSecret(refreshToken)}, ${row.session_id})`;
    // The session now belongs to this party: only it may refresh, and refreshes re-issue ID tokens.
    await tx`update customer_sessions set oidc_client_id = ${row.client_id}, oidc_issuer = ${input.issuer}, oidc_scopes = ${row.scopes}, auth_time = ${row.auth_time}
             where id = ${row.session_id}`;
    return { kind: 'ok' as const, row, refreshToken };
  });
  if (outcome.kind === 'replay') {
    await revokeSession(sql, tokens, outcome.row.project_id, outcome.row.session_id, 'authorization_code_reuse');
  }
  if (
    outcome.kind === 'spent' &&
    outcome.row.client_id === input.clientId &&
    outcome.row.project_id === input.projectId
  ) {
    // The rightful client failed its own code (wrong verifier or redirect): nothing was issued; end the login.
    await revokeSession(sql, tokens, outcome.row.project_id, outcome.row.session_id, 'authorization_code_failed');
  }
  if (outcome.kind !== 'ok') return { ok: false, error: 'invalid_grant', description: INVALID_GRANT };
  const { row, refreshToken } = outcome;
  const access = await tokens.mint({
    projectId: row.project_id,
    customerId: row.customer_id,
    email: row.email,
    scopes: row.session_scopes,
    sessionId: row.session_id,
    ttlSeconds: input.ttlSeconds,
  });
  const body: TokenResponse = {
    access_token: access.token,
    token_type: 'Bearer',
    expires_in: access.expiresIn,
    refresh_token: refreshToken,
    scope: row.scopes.join(' '),
  };
  if (row.scopes.includes('openid')) {
    body.id_token = await mintIdToken(tokens, {
      issuer: input.issuer,
      audience: wireClientId(row.project_id, row.client_id),
      subject: row.customer_id,
      sessionId: row.session_id,
      nonce: row.nonce,
      authTime: row.auth_time,
      claims: scopedClaims(row.scopes, {
        email: row.email,
        name: row.name,
        emailVerified: row.email_verified_at !== null,
      }),
    });
  }
  return { ok: true, body };
}

const INVALID_REFRESH = 'the refresh token is invalid, expired, revoked, or was issued to another client';

/**
 * RFC 6749 §6 for a hosted-login session: the refresh token must belong to a session this
 * party obtained (a token of another party or of the GraphQL login is invalid_grant). It rotates
 * like refreshCustomerToken, and with `openid` a new ID token comes along (OpenID Core §12.2:
 * same iss, sub, aud and auth_time; a fresh iat; no nonce).
 */
export async function refreshGrant(
  sql: Sql,
  tokens: TokenService,
  input: { projectId: string; clientId: string; refreshToken: unknown; ttlSeconds?: number | undefined },
): Promise<ExchangeResult> {
  const fail: ExchangeResult = { ok: false, error: 'invalid_grant', description: INVALID_REFRESH };
  if (typeof input.refreshToken !== 'string' || !/^rt_[0-9a-f]{64}$/.test(input.refreshToken)) return fail;
  const [s] = await sql<
    {
      oidc_client_id: string | null;
      oidc_issuer: string | null;
      oidc_scopes: string[] | null;
      auth_time: Date | null;
    }[]
  >`
    select s.oidc_client_id, s.oidc_issuer, s.oidc_scopes, s.auth_time from customer_refresh_tokens t join customer_sessions s on s.id = t.session_id
    where t.token_hash = ${hashSecret(input.refreshToken)} and s.project_id = ${input.projectId}`;
  if (!s || s.oidc_client_id !== input.clientId) return fail;
  let out: Awaited<ReturnType<typeof refreshSession>>;
  try {
    out = await refreshSession(sql, tokens, input.projectId, input.refreshToken, input.ttlSeconds);
  } catch (err) {
    if (err instanceof Unauthenticated) return fail;
    throw err;
  }
  const scopes = s.oidc_scopes ?? [];
  const body: TokenResponse = {
    access_token: out.accessToken,
    token_type: 'Bearer',
    expires_in: out.expiresIn,
    refresh_token: out.refreshToken,
    scope: scopes.join(' '),
  };
  if (scopes.includes('openid') && s.oidc_issuer) {
    const [c] = await sql<{ email: string; name: string | null; email_verified_at: Date | null }[]>`
      select email, name, email_verified_at from customers where id = ${out.customerId} and project_id = ${input.projectId}`;
    if (!c) return fail;
    body.id_token = await mintIdToken(tokens, {
      issuer: s.oidc_issuer,
      audience: wireClientId(input.projectId, input.clientId),
      subject: out.customerId,
      sessionId: out.sessionId,
      nonce: null,
      authTime: s.auth_time ?? new Date(),
      claims: scopedClaims(scopes, { email: c.email, name: c.name, emailVerified: c.email_verified_at !== null }),
    });
  }
  return { ok: true, body };
}

/** OpenID Connect Core §2 ID token, signed with the deployment's current EdDSA key. */
export async function mintIdToken(
  tokens: TokenService,
  t: {
    issuer: string;
    audience: string;
    subject: string;
    sessionId: string;
    nonce: string | null;
    authTime: Date;
    claims: Record<string, unknown>;
  },
): Promise<string> {
  await tokens.ready;
  const { kid, key } = await tokens.keys.signer();
  const payload: Record<string, unknown> = {
    ...t.claims,
    sid: t.sessionId,
    auth_time: Math.floor(t.authTime.getTime() / 1000),
  };
  if (t.nonce !== null) payload.nonce = t.nonce;
  return new SignJWT(payload)
    .setProtectedHeader({ alg: ALG, kid, typ: 'JWT' })
    .setIssuer(t.issuer)
    .setAudience(t.audience)
    .setSubject(t.subject)
    .setIssuedAt()
    .setExpirationTime(`${ID_TOKEN_SECONDS}s`)
    .sign(key);
}
