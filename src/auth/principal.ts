/**
 * The seam between authentication (issue: API keys and scopes) and everything that serves a
 * request (GraphQL, REST, realtime). A request is resolved once into a `RequestPrincipal`;
 * code downstream asks it questions and never looks at headers again.
 */
export type KeyKind = 'pk' | 'sk' | 'pk_t' | 'sk_t';

/** Which documents a key may send (src/graphql/trusted.ts): null follows the project's `documentPolicy`. */
export type DocumentPolicy = 'any' | 'apq' | 'trusted-only';

export interface KeyPrincipal {
  keyId: string;
  kind: KeyKind;
  tenantId: string;
  /** The project this request acts on (the key's project, or X-Project-Id for tenant keys). */
  projectId: string;
  scopes: ReadonlySet<string>;
  /** Model allow-list; null when the key is not model-restricted. */
  allowedModels: readonly string[] | null;
  allowedFileTypes: readonly string[] | null;
  /**
   * Identifies what the key may see: keys with equal fingerprints share one generated schema
   * and one compiled-query cache (and one response cache partition).
   */
  fingerprint: string;
  /**
   * Set when a signed-in member (the Studio's session, not an API key) makes the request:
   * `keyId` is then the member id, and field access rules see the `admin` principal.
   */
  member?: { memberId: string; role: string };
  /** The key's document policy; absent or null: the project's setting, else `any`. */
  documents?: DocumentPolicy | null;
}

/** A verified customer access token (src/identity/tokens.ts `verifyAccessToken`). */
export interface CustomerPrincipal {
  customerId: string;
  email: string | null;
  /** The scopes stamped into the token at login (`scope` claim). */
  scopes: ReadonlySet<string>;
  /** The project the token was issued for (`aud`). */
  projectId: string;
  /** The login session (`sid`): logout or refresh-token reuse revokes it. */
  sessionId: string;
  /** When the token expires, epoch milliseconds (`exp`). */
  expiresAt: number;
}

export interface RequestPrincipal {
  key: KeyPrincipal;
  /** Present when a valid customer access token came with the key. */
  customer: CustomerPrincipal | null;
}

export function isPublicKey(kind: KeyKind): boolean {
  return kind === 'pk' || kind === 'pk_t';
}

export function isTenantKey(kind: KeyKind): boolean {
  return kind === 'pk_t' || kind === 'sk_t';
}
