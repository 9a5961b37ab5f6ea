import { compactVerify, type JWSHeaderParameters } from 'jose';
import type { TokenService } from '../tokens.ts';
import { ALG } from '../token-signing-keys.ts';
import { parseClientId, type Party } from './protocol.ts';

/**
 * OpenID Connect RP-Initiated Logout 1.0 (`end_session_endpoint`). An `id_token_hint` is one of
 * our ID tokens for this issuer: its signature is checked, its expiry is not (a party may log
 * out a customer whose ID token has expired).
 */
export interface Hint {
  projectId: string;
  clientId: string;
  customerId: string;
  sessionId: string | null;
}

export async function readIdTokenHint(tokens: TokenService, token: unknown, issuer: string): Promise<Hint | null> {
  if (typeof token !== 'string' || token.length === 0 || token.length > 4096) return null;
  await tokens.ready;
  try {
    const { payload } = await compactVerify(token, async (h: JWSHeaderParameters) => {
      if (h.alg !== ALG) throw new Error('alg');
      const k = await tokens.keys.publicKeyOrReload(h.kid);
      if (!k) throw new Error('kid');
      return k;
    });
    const claims = JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
    const aud = parseClientId(Array.isArray(claims.aud) ? claims.aud[0] : claims.aud);
    if (claims.iss !== issuer || !aud || typeof claims.sub !== 'string') return null;
    return { ...aud, customerId: claims.sub, sessionId: typeof claims.sid === 'string' ? claims.sid : null };
  } catch {
    return null;
  }
}

/** A post-logout redirect must be registered exactly: one of the party's redirectUris or its postLoginUrl. */
export function postLogoutAllowed(party: Party, uri: unknown): uri is string {
  return typeof uri === 'string' && (party.redirectUris.includes(uri) || party.postLoginUrl === uri);
}
