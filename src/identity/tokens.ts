import { jwtVerify, SignJWT, type JWTHeaderParameters } from 'jose';
import { randomBytes } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import type { CustomerPrincipal } from '../auth/principal.ts';
import { Unauthenticated } from '../errors.ts';
import { secretsKey } from '../secrets-key.ts';
import { ALG, MAX_TOKEN_SECONDS, SigningKeys } from './token-signing-keys.ts';

/**
 * Customer access tokens (CONTRACT §8) and the API other capabilities use:
 *
 *   verifyAccessToken(svc, token, projectId) → Promise<CustomerPrincipal>
 *     EdDSA signature against the deployment's key set, `iss` svc-customer, `aud` the project,
 *     `exp`/`nbf`, and the in-memory revocation list. Anything wrong throws
 *     Unauthenticated('Invalid or expired token') — never a reason (no oracle for forgers).
 *   onSessionRevoked(svc, listener) → unsubscribe
 *     Called in every process within a NOTIFY round trip when a session is revoked (logout,
 *     refresh-token reuse), and for sessions found revoked after a bus reconnect. Realtime
 *     closes the session's sockets (4403); anything holding a CustomerPrincipal can compare
 *     `sessionId`.
 *
 * Revocation is a list, not a query: each process holds the ids of sessions revoked within the
 * longest token lifetime (MAX_TOKEN_SECONDS), loaded at start and after a bus reconnect, fed by
 * `customer.session.revoked`. Its size is bounded by logouts per hour, not by traffic.
 * Verified tokens are cached (bounded in bytes) so a token's signature is checked once per
 * process; expiry and revocation are still checked on every use. The cache is keyed by the
 * token string itself rather than a digest of it: the string is hashed by the Map for free,
 * where a SHA-256 of a ~700-character token costs about a microsecond on every request, and the
 * token is in this process' memory for the request anyway (it is never stored or logged).
 * What other capabilities derive from a token once (the targeting context) is kept in the same
 * entry (`memo`), bytes counted.
 */
export const ISSUER = 'svc-customer';
export const INVALID_TOKEN = 'Invalid or expired token';
export const DEFAULT_TOKEN_SECONDS = 15 * 60;
const TOKEN_TYP = 'at+jwt';
/** Longest token string considered at all. */
const MAX_TOKEN_CHARS = 4096;
const VERIFIED_CACHE_BYTES = 8 * 1024 * 1024;

export interface IdentityDeps {
  sql: Sql;
  bus: EventBus;
  settings: { dataDir: string };
}

export interface SessionRevoked {
  projectId: string;
  customerId: string;
  sessionId: string;
}

interface Verified {
  token: string;
  principal: CustomerPrincipal;
  /** The entry's estimated heap, the memo's included. */
  bytes: number;
  /** What a capability derived from this token once (see `memo`), and its estimated bytes. */
  memo?: { value: unknown; bytes: number };
}

export class TokenService {
  readonly keys: SigningKeys;
  readonly #sql: Sql;
  readonly #bus: EventBus;
  /** sessionId → epoch ms until which it must stay listed (its last token's expiry at the latest). */
  readonly #revoked = new Map<string, number>();
  readonly #listeners = new Set<(e: SessionRevoked) => void>();
  readonly #verified = new Map<string, Verified>();
  /** The cache entry of a principal this service handed out (memo lookups). */
  readonly #entryOf = new WeakMap<CustomerPrincipal, Verified>();
  #verifiedBytes = 0;
  readonly #unsubscribe: (() => void)[] = [];
  readonly #sweep: ReturnType<typeof setInterval>;
  readonly ready: Promise<void>;

  constructor(deps: IdentityDeps) {
    this.#sql = deps.sql;
    this.#bus = deps.bus;
    this.keys = new SigningKeys(deps.sql, secretsKey(deps.settings.dataDir));
    this.#unsubscribe.push(
      deps.bus.subscribe((e) => {
        if (e.type === 'customer.session.revoked') this.#markRevoked(e, Date.now() + MAX_TOKEN_SECONDS * 1000);
        else if (e.type === 'signing-keys.changed') void this.keys.reload().catch(() => {});
      }),
      // Revocations and rotations announced while the listener was away were never heard.
      deps.bus.onReconnect(() => {
        void this.#loadRevoked().catch(() => {});
        void this.keys.reload().catch(() => {});
      }),
    );
    this.#sweep = setInterval(() => this.#sweepExpired(), 60_000);
    this.#sweep.unref?.();
    this.ready = Promise.all([this.keys.init(), this.#loadRevoked()]).then(() => {});
    this.ready.catch(() => {}); // surfaced to whoever awaits it
  }

  close(): void {
    for (const u of this.#unsubscribe) u();
    clearInterval(this.#sweep);
    this.#listeners.clear();
    this.#verified.clear();
  }

  async #loadRevoked(): Promise<void> {
    const rows = await this.#sql<{ id: string; project_id: string; customer_id: string; until: number }[]>`
      select id, project_id, customer_id,
             (extract(epoch from revoked_at) * 1000)::float8 + ${MAX_TOKEN_SECONDS * 1000} as until
      from customer_sessions where revoked_at > now() - make_interval(secs => ${MAX_TOKEN_SECONDS})`;
    for (const r of rows)
      this.#markRevoked({ projectId: r.project_id, customerId: r.customer_id, sessionId: r.id }, Number(r.until));
  }

  #markRevoked(e: SessionRevoked, until: number): void {
    const known = this.#revoked.has(e.sessionId);
    this.#revoked.set(e.sessionId, Math.max(until, this.#revoked.get(e.sessionId) ?? 0));
    if (known) return;
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch (err) {
        console.error('session revocation listener failed:', err instanceof Error ? err.message : err);
      }
    }
  }

  #sweepExpired(): void {
    const now = Date.now();
    for (const [sid, until] of this.#revoked) if (until <= now) this.#revoked.delete(sid);
    for (const [token, v] of this.#verified) if (v.principal.expiresAt <= now) this.#dropVerified(token, v);
  }

  #dropVerified(token: string, v: Verified): void {
    this.#verified.delete(token);
    this.#verifiedBytes -= v.bytes;
  }

  onSessionRevoked(listener: (e: SessionRevoked) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  isRevoked(sessionId: string): boolean {
    return this.#revoked.has(sessionId);
  }

  /** Records the revocation here at once and tells every other process (call after commit). */
  async announceRevoked(e: SessionRevoked): Promise<void> {
    await this.#bus.publish({ type: 'customer.session.revoked', ...e });
  }

  async mint(claims: {
    projectId: string;
    customerId: string;
    email: string;
    scopes: readonly string[];
    sessionId: string;
    ttlSeconds?: number;
  }): Promise<{ token: string; expiresIn: number }> {
    await this.ready;
    const ttl = Math.min(Math.max(claims.ttlSeconds ?? DEFAULT_TOKEN_SECONDS, 30), MAX_TOKEN_SECONDS);
    const { kid, key } = await this.keys.signer();
    const token = await new SignJWT({ scope: claims.scopes.join(' '), sid: claims.sessionId, email: claims.email })
      .setProtectedHeader({ alg: ALG, kid, typ: TOKEN_TYP })
      .setIssuer(ISSUER)
      .setAudience(claims.projectId)
      .setSubject(claims.customerId)
      .setIssuedAt()
      .setExpirationTime(`${ttl}s`)
      .setJti(randomBytes(12).toString('hex'))
      .sign(key);
    return { token, expiresIn: ttl };
  }

  /**
   * The synchronous fast path of `verify`: a token this process verified before → its principal
   * (expiry, project and revocation checked now; throws Unauthenticated), else undefined (call
   * `verify`). One Map read and three comparisons, no promise.
   */
  verifyCached(token: string, projectId: string): CustomerPrincipal | undefined {
    const hit = this.#verified.get(token);
    return hit ? this.#check(hit.principal, projectId) : undefined;
  }

  /** See the module comment. The fast path (a token seen before) is two Map reads. */
  async verify(token: string, projectId: string): Promise<CustomerPrincipal> {
    const hit = this.#verified.get(token);
    if (hit) return this.#check(hit.principal, projectId);
    if (typeof token !== 'string' || token.length === 0 || token.length > MAX_TOKEN_CHARS)
      throw new Unauthenticated(INVALID_TOKEN);
    await this.ready;
    let principal: CustomerPrincipal;
    try {
      const { payload } = await jwtVerify(
        token,
        async (h: JWTHeaderParameters) => {
          const k = await this.keys.publicKeyOrReload(h.kid);
          if (!k) throw new Error('unknown kid');
          return k;
        },
        { issuer: ISSUER, algorithms: [ALG], typ: TOKEN_TYP, requiredClaims: ['sub', 'sid', 'exp', 'aud'] },
      );
      const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
      if (aud.length !== 1 || typeof aud[0] !== 'string' || typeof payload.sid !== 'string')
        throw new Error('bad claims');
      principal = {
        customerId: payload.sub!,
        email: typeof payload.email === 'string' ? payload.email : null,
        scopes: new Set(typeof payload.scope === 'string' && payload.scope ? payload.scope.split(' ') : []),
        projectId: aud[0],
        sessionId: payload.sid,
        expiresAt: payload.exp! * 1000,
      };
    } catch {
      throw new Unauthenticated(INVALID_TOKEN);
    }
    const bytes = token.length * 2 + 400;
    this.#makeRoom(bytes);
    const entry: Verified = { token, principal, bytes };
    this.#verified.set(token, entry);
    this.#entryOf.set(principal, entry);
    this.#verifiedBytes += bytes;
    return this.#check(principal, projectId);
  }

  #makeRoom(bytes: number): void {
    while (this.#verifiedBytes + bytes > VERIFIED_CACHE_BYTES && this.#verified.size > 0) {
      const [oldest, v] = this.#verified.entries().next().value as [string, Verified];
      this.#dropVerified(oldest, v);
    }
  }

  /**
   * Per-token memo for what a capability derives from a verified token once instead of per
   * request (the read's targeting context: graphql/targeting.ts). Kept in the token's cache
   * entry, so its bytes count against the same bound and it goes when the token does.
   */
  memo<T>(principal: CustomerPrincipal): T | undefined {
    return this.#entryOf.get(principal)?.memo?.value as T | undefined;
  }

  /** Stores `value` (estimated `bytes`) as the principal's memo; ignored once its token left the cache. */
  setMemo(principal: CustomerPrincipal, value: unknown, bytes: number): void {
    const v = this.#entryOf.get(principal);
    if (!v || this.#verified.get(v.token) !== v) return;
    const delta = bytes - (v.memo?.bytes ?? 0);
    v.memo = { value, bytes };
    v.bytes += delta;
    this.#verifiedBytes += delta;
    // Over the bound: the oldest tokens go (this one last: it is the newest or was just used).
    this.#makeRoom(0);
  }

  #check(p: CustomerPrincipal, projectId: string): CustomerPrincipal {
    if (p.projectId !== projectId || p.expiresAt <= Date.now() || this.#revoked.has(p.sessionId))
      throw new Unauthenticated(INVALID_TOKEN);
    return p;
  }
}

const states = new WeakMap<EventBus, TokenService>();

/** The per-process token service of a Service (keyed by its bus), created on first use. */
export function tokenService(deps: IdentityDeps): TokenService {
  let s = states.get(deps.bus);
  if (!s) {
    s = new TokenService(deps);
    states.set(deps.bus, s);
  }
  return s;
}

/** Part of Service.close. */
export function closeTokenService(deps: Pick<IdentityDeps, 'bus'>): void {
  states.get(deps.bus)?.close();
  states.delete(deps.bus);
}

/** Verifies a customer access token for a project; throws Unauthenticated('Invalid or expired token'). */
export function verifyAccessToken(deps: IdentityDeps, token: string, projectId: string): Promise<CustomerPrincipal> {
  return tokenService(deps).verify(token, projectId);
}

/** Subscribes to session revocations in this process (see the module comment). */
export function onSessionRevoked(deps: IdentityDeps, listener: (e: SessionRevoked) => void): () => void {
  return tokenService(deps).onSessionRevoked(listener);
}

/** `Authorization: Bearer <token>` → the token, or null when there is none. */
export function bearerToken(header: string | null | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}
