import { decodeJwt } from 'jose';
import type { CustomerPrincipal } from '../auth/principal.ts';
import { Unauthenticated } from '../errors.ts';
import { INVALID_TOKEN } from './tokens.ts';

/** Customer access token → customer, for a project (verifyAccessToken of ./tokens.ts). */
export type VerifyToken = (token: string, projectId: string) => Promise<CustomerPrincipal>;

/**
 * A customer access token presented without an API key (CONTRACT §10: collaboration rooms,
 * `/sse/{channel}`, `/_events`). The project is the token's audience, and the token is then
 * verified for that project (signature, expiry, revocation): reading `aud` before verifying only
 * picks which project's keys to verify with, so a forged audience fails verification.
 */
export function verifyTokenAlone(verify: VerifyToken, token: string): Promise<CustomerPrincipal> {
  return verify(token, audienceOf(token));
}

function audienceOf(token: string): string {
  try {
    const aud = decodeJwt(token).aud;
    const project = Array.isArray(aud) ? aud[0] : aud;
    if (typeof project === 'string' && project.length > 0 && project.length <= 128) return project;
  } catch {
    // not a JWT
  }
  throw new Unauthenticated(INVALID_TOKEN);
}
