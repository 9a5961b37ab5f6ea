/**
 * The hosted customer login as an OpenID provider (issue 16, CONTRACT §8): wire formats and
 * checks with no I/O. One issuer for the deployment (`{base_url}/customer`); a relying party is
 * named on the wire as `{projectId}.{clientId}` because `clientId` is unique per project only.
 * Access tokens stay the customers' tokens (`iss: svc-customer`); the ID token is the OpenID one.
 */
export const OIDC_SCOPES = ['openid', 'email', 'profile', 'offline_access'] as const;
/** Scopes a party may always request: `openid` asks for an ID token, nothing more. */
const ALWAYS_ALLOWED = new Set(['openid']);
export const CODE_SECONDS = 60;
export const ID_TOKEN_SECONDS = 15 * 60;
const MAX_PARAM = 2048;

export interface Endpoints {
  baseUrl: string;
  authUrl: string;
}

export const issuerOf = (e: Endpoints) => `${e.baseUrl}/customer`;

export function discoveryDocument(e: Endpoints): Record<string, unknown> {
  return {
    issuer: issuerOf(e),
    authorization_endpoint: `${e.authUrl}/authorize`,
    token_endpoint: `${e.baseUrl}/customer/oauth/token`,
    jwks_uri: `${e.baseUrl}/.well-known/jwks.json`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['EdDSA'],
    token_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [...OIDC_SCOPES],
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'sid', 'email', 'email_verified', 'name'],
  };
}

/** `{projectId}.{clientId}` → its parts, or null. */
export function parseClientId(v: unknown): { projectId: string; clientId: string } | null {
  if (typeof v !== 'string' || v.length > 300) return null;
  const dot = v.indexOf('.');
  if (dot <= 0 || dot === v.length - 1) return null;
  return { projectId: v.slice(0, dot), clientId: v.slice(dot + 1) };
}

export const wireClientId = (projectId: string, clientId: string) => `${projectId}.${clientId}`;

export interface Party {
  projectId: string;
  clientId: string;
  name: string;
  redirectUris: string[];
  allowedScopes: string[] | null;
  allowedOrigins: string[];
  loginMethods: { password: boolean; otp: boolean };
}

/** Exact string equality only (RFC 9700 §4.1.3): no prefix, no case folding, no normalisation. */
export function redirectAllowed(party: Party, uri: unknown): uri is string {
  return typeof uri === 'string' && party.redirectUris.includes(uri);
}

export interface AuthorizeRequest {
  client_id: string;
  redirect_uri: string;
  state: string | null;
  nonce: string | null;
  scopes: string[];
  code_challenge: string;
}

export type AuthorizeCheck =
  | { kind: 'ok'; request: AuthorizeRequest }
  /** Shown on our own page: the client or redirect URI cannot be trusted with a redirect. */
  | { kind: 'page'; message: string }
  /** RFC 6749 §4.1.2.1: sent back to the (validated) redirect URI. */
  | { kind: 'redirect'; redirectUri: string; error: string; description: string; state: string | null };

const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 && v.length <= MAX_PARAM ? v : null);

/** Validates an authorization request against its party (found by the caller from client_id). */
export function checkAuthorize(params: Record<string, unknown>, party: Party | null): AuthorizeCheck {
  if (!party) return { kind: 'page', message: 'This application is not known (unknown client_id).' };
  for (const k of ['client_id', 'redirect_uri'] as const) {
    if (Array.isArray(params[k])) return { kind: 'page', message: `${k} was sent more than once.` };
  }
  if (!redirectAllowed(party, params.redirect_uri)) {
    return { kind: 'page', message: 'The redirect_uri is not registered for this application.' };
  }
  const redirectUri = params.redirect_uri as string;
  const state = str(params.state);
  const fail = (error: string, description: string): AuthorizeCheck => ({ kind: 'redirect', redirectUri, error, description, state });
  for (const k of ['response_type', 'state', 'nonce', 'scope', 'code_challenge', 'code_challenge_method']) {
    if (Array.isArray(params[k])) return fail('invalid_request', `${k} was sent more than once`);
  }
  if (params.response_type !== 'code') return fail('unsupported_response_type', 'response_type must be code');
  if (params.request !== undefined || params.request_uri !== undefined) return fail('request_not_supported', 'request objects are not supported');
  const challenge = params.code_challenge;
  if (typeof challenge !== 'string' || challenge === '') return fail('invalid_request', 'PKCE is required: code_challenge with code_challenge_method=S256');
  if (params.code_challenge_method !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256');
  if (!/^[A-Za-z0-9_-]{43}$/.test(challenge)) return fail('invalid_request', 'code_challenge must be a base64url SHA-256 (43 characters)');
  const scopes = typeof params.scope === 'string' ? [...new Set(params.scope.split(' ').filter(Boolean))] : [];
  if (scopes.length > 50) return fail('invalid_scope', 'too many scopes');
  const notAllowed = party.allowedScopes ? scopes.filter((s) => !ALWAYS_ALLOWED.has(s) && !party.allowedScopes!.includes(s)) : [];
  if (notAllowed.length > 0) return fail('invalid_scope', `scope not allowed for this application: ${notAllowed.join(' ')}`);
  const nonce = params.nonce === undefined ? null : str(params.nonce);
  if (params.nonce !== undefined && nonce === null) return fail('invalid_request', 'nonce is not valid');
  if (params.state !== undefined && state === null) return { kind: 'redirect', redirectUri, error: 'invalid_request', description: 'state is not valid', state: null };
  return { kind: 'ok', request: { client_id: wireClientId(party.projectId, party.clientId), redirect_uri: redirectUri, state, nonce, scopes, code_challenge: challenge } };
}

/** The redirect of RFC 6749 §4.1.2 / §4.1.2.1 (query added to the registered URI, which has none of ours). */
export function redirectWith(redirectUri: string, params: Record<string, string | null>): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== null) u.searchParams.append(k, v);
  return u.toString();
}

/** RFC 7636 S256: BASE64URL(SHA256(verifier)) equals the challenge. */
export function verifierMatches(verifier: unknown, challenge: string): boolean {
  if (typeof verifier !== 'string' || !/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return false;
  const digest = new Bun.CryptoHasher('sha256').update(verifier).digest('base64url');
  return digest === challenge;
}

/** RFC 6749 §5.2 error body. */
export function tokenError(error: string, description: string): { status: number; body: { error: string; error_description: string } } {
  return { status: error === 'invalid_client' ? 401 : 400, body: { error, error_description: description } };
}
