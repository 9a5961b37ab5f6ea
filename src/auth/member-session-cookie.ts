import { sign, verify } from '../crypto/hmac.ts';

/**
 * The member-session credential (the Studio's sign-in, docs/studio.md) as the gate sees it: a
 * random token in an `HttpOnly; SameSite=Strict` cookie, plus a CSRF token that a page can only
 * learn by asking the API with the cookie (`GET /studio/api/session`). The CSRF token is an
 * HMAC of the session token, so it needs no storage and dies with the session. Every request
 * authenticated by the cookie must carry it: `X-CSRF-Token` on HTTP, or the `csrf` query
 * parameter on a WebSocket upgrade (browsers cannot set headers there).
 */
export const SESSION_COOKIE = 'svc_session';
export const CSRF_HEADER = 'x-csrf-token';
export const CSRF_PARAM = 'csrf';
/** Session tokens: `ms_` + 64 hex characters. */
const TOKEN = /^ms_[0-9a-f]{64}$/;

export function csrfTokenOf(sessionToken: string): string {
  return sign(sessionToken, 'svc/studio/csrf', 'base64url');
}

export function csrfMatches(sessionToken: string, given: string | null): boolean {
  if (!given || given.length > 100) return false;
  return verify(sessionToken, 'svc/studio/csrf', given, 'base64url');
}

/** The session token of a `Cookie` header, or null (absent or not of our shape). */
export function sessionTokenOf(cookieHeader: string | null): string | null {
  if (!cookieHeader || cookieHeader.length > 8192) return null;
  for (const part of cookieHeader.split(';')) {
    const i = part.indexOf('=');
    if (i < 0 || part.slice(0, i).trim() !== SESSION_COOKIE) continue;
    const v = part.slice(i + 1).trim();
    return TOKEN.test(v) ? v : null;
  }
  return null;
}

/** `Set-Cookie` for a new session (or, with `null`, one that clears it). */
export function sessionCookie(token: string | null, opts: { secure: boolean; maxAgeSeconds: number }): string {
  const attrs = ['Path=/', 'HttpOnly', 'SameSite=Strict', ...(opts.secure ? ['Secure'] : [])];
  if (token === null) return [`${SESSION_COOKIE}=`, ...attrs, 'Max-Age=0'].join('; ');
  return [`${SESSION_COOKIE}=${token}`, ...attrs, `Max-Age=${opts.maxAgeSeconds}`].join('; ');
}
