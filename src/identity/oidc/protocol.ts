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

/**
 * Where one OpenID provider answers. The deployment's site: issuer `{base_url}/customer`, the
 * login under `{auth_url}`. A verified custom domain is a site of its own: issuer
 * `https://<domain>`, every endpoint on that host (as white-label providers do, so a relying
 * party's discovery, redirects and ID tokens all name the domain).
 */
export interface Site {
  issuer: string;
  /** Base of the login pages: `{auth_url}` or `https://<domain>`. */
  authBase: string;
  /** Base of discovery, token and userinfo: `{base_url}/customer` or `https://<domain>`. */
  apiBase: string;
  jwksUri: string;
  /** The host the browser-session cookie lives on, and its path. */
  host: string;
  cookiePath: string;
  /** Set on a custom domain: the party the domain belongs to. */
  domain: { projectId: string; clientId: string } | null;
}

export function defaultSite(baseUrl: string, authUrl: string): Site {
  const auth = new URL(authUrl);
  return {
    issuer: `${baseUrl}/customer`,
    authBase: authUrl,
    apiBase: `${baseUrl}/customer`,
    jwksUri: `${baseUrl}/.well-known/jwks.json`,
    host: auth.host,
    cookiePath: auth.pathname.replace(/\/$/, '') || '/',
    domain: null,
  };
}

export function domainSite(origin: string, domain: { projectId: string; clientId: string }): Site {
  return {
    issuer: origin,
    authBase: origin,
    apiBase: origin,
    jwksUri: `${origin}/.well-known/jwks.json`,
    host: new URL(origin).host,
    cookiePath: '/',
    domain,
  };
}

export function discoveryDocument(site: Site): Record<string, unknown> {
  return {
    issuer: site.issuer,
    authorization_endpoint: `${site.authBase}/authorize`,
    token_endpoint: `${site.apiBase}/oauth/token`,
    userinfo_endpoint: `${site.apiBase}/oauth/userinfo`,
    end_session_endpoint: `${site.authBase}/logout`,
    jwks_uri: site.jwksUri,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['EdDSA'],
    token_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [...OIDC_SCOPES],
    prompt_values_supported: ['none', 'login'],
    claims_supported: [
      'iss',
      'sub',
      'aud',
      'exp',
      'iat',
      'auth_time',
      'nonce',
      'sid',
      'email',
      'email_verified',
      'name',
    ],
    authorization_response_iss_parameter_supported: true,
  };
}

/** The OpenID claims a session's scopes release (ID token and userinfo). */
export function scopedClaims(
  scopes: readonly string[],
  c: { email: string; name: string | null; emailVerified: boolean },
): Record<string, unknown> {
  return {
    ...(scopes.includes('email') ? { email: c.email, email_verified: c.emailVerified } : {}),
    ...(scopes.includes('profile') && c.name ? { name: c.name } : {}),
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
  postLoginUrl: string | null;
  loginMethods: { password: boolean; otp: boolean; disabledProviders: string[] };
}

/**
 * Whether the browser session may serve this landing URL: only a party listing the URL's
 * origin in `allowedOrigins` (exact match) gets one; none listed, none at all.
 */
export function browserSessionAllowed(party: Party, landing: string): boolean {
  let origin: string;
  try {
    origin = new URL(landing).origin;
  } catch {
    return false;
  }
  return party.allowedOrigins.includes(origin);
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
  /** OpenID `prompt`: `none` (never show the page) or `login` (always show it). */
  prompt: 'none' | 'login' | null;
  /** OpenID `max_age` in seconds: an older browser session asks again. */
  max_age: number | null;
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
  const fail = (error: string, description: string): AuthorizeCheck => ({
    kind: 'redirect',
    redirectUri,
    error,
    description,
    state,
  });
  for (const k of [
    'response_type',
    'state',
    'nonce',
    'scope',
    'code_challenge',
    'code_challenge_method',
    'prompt',
    'max_age',
  ]) {
    if (Array.isArray(params[k])) return fail('invalid_request', `${k} was sent more than once`);
  }
  if (params.response_type !== 'code') return fail('unsupported_response_type', 'response_type must be code');
  if (params.request !== undefined || params.request_uri !== undefined)
    return fail('request_not_supported', 'request objects are not supported');
  const challenge = params.code_challenge;
  if (typeof challenge !== 'string' || challenge === '')
    return fail('invalid_request', 'PKCE is required: code_challenge with code_challenge_method=S256');
  if (params.code_challenge_method !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256');
  if (!/^[A-Za-z0-9_-]{43}$/.test(challenge))
    return fail('invalid_request', 'code_challenge must be a base64url SHA-256 (43 characters)');
  const scopes = typeof params.scope === 'string' ? [...new Set(params.scope.split(' ').filter(Boolean))] : [];
  if (scopes.length > 50) return fail('invalid_scope', 'too many scopes');
  const notAllowed = party.allowedScopes
    ? scopes.filter((s) => !ALWAYS_ALLOWED.has(s) && !party.allowedScopes!.includes(s))
    : [];
  if (notAllowed.length > 0)
    return fail('invalid_scope', `scope not allowed for this application: ${notAllowed.join(' ')}`);
  const nonce = params.nonce === undefined ? null : str(params.nonce);
  if (params.nonce !== undefined && nonce === null) return fail('invalid_request', 'nonce is not valid');
  if (params.state !== undefined && state === null)
    return { kind: 'redirect', redirectUri, error: 'invalid_request', description: 'state is not valid', state: null };
  const prompts = typeof params.prompt === 'string' ? params.prompt.split(' ').filter(Boolean) : [];
  if (prompts.some((p) => !['none', 'login', 'consent', 'select_account'].includes(p)))
    return fail('invalid_request', 'prompt must be none, login, consent or select_account');
  if (prompts.includes('none') && prompts.length > 1)
    return fail('invalid_request', 'prompt=none cannot be combined with other values');
  const prompt = prompts.includes('none') ? 'none' : prompts.includes('login') ? 'login' : null;
  let maxAge: number | null = null;
  if (params.max_age !== undefined) {
    if (typeof params.max_age !== 'string' || !/^\d{1,9}$/.test(params.max_age))
      return fail('invalid_request', 'max_age must be a whole number of seconds');
    maxAge = Number(params.max_age);
  }
  return {
    kind: 'ok',
    request: {
      client_id: wireClientId(party.projectId, party.clientId),
      redirect_uri: redirectUri,
      state,
      nonce,
      scopes,
      code_challenge: challenge,
      prompt,
      max_age: maxAge,
    },
  };
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
export function tokenError(
  error: string,
  description: string,
): { status: number; body: { error: string; error_description: string } } {
  return { status: error === 'invalid_client' ? 401 : 400, body: { error, error_description: description } };
}
