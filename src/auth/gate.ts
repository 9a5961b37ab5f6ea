import { createHash } from 'node:crypto';
import { safeEqual } from '../crypto/hmac.ts';
import { PermissionDenied, Unauthenticated } from '../errors.ts';
import { hashSecret } from '../ids.ts';
import { kindOfKey } from './api-keys.ts';
import {
  isPublicKey,
  isTenantKey,
  type CustomerPrincipal,
  type KeyPrincipal,
  type RequestPrincipal,
} from './principal.ts';
import { rateLimitError, rateLimitHeaders, type RateDecision, type RateLimiter } from './rate-limit.ts';
import {
  AUTH_REQUIRED,
  headerOf,
  isLive,
  MAX_HEADER,
  originAllowed,
  type CachedKey,
  type HeaderSource,
  type KeyResolver,
} from './resolve.ts';
import { INSUFFICIENT } from './scopes.ts';
import { CSRF_HEADER, CSRF_PARAM, csrfMatches, sessionTokenOf } from './member-session-cookie.ts';

/**
 * The one way in for every surface that takes an API key: GraphQL over HTTP, REST, and the
 * WebSocket / SSE upgrades of the gateway (graphql-ws, /sse, /_events, collaboration rooms).
 * It authenticates the key (cache, origin rules), resolves a customer token when a resolver is
 * installed, counts the rate limit and hands back the headers every response carries. Errors
 * are SvcErrors of the spec's table; a refusal carries its response headers (`err.headers`).
 *
 * Browsers cannot set headers on a WebSocket or an EventSource, so upgrades may pass the URL's
 * query parameters: `apiKey`, `projectId` and `token` stand in for `x-api-key`, `X-Project-Id`
 * and `Authorization: Bearer`. A header wins over a parameter. Plain HTTP surfaces pass none.
 */

/**
 * Customer access token → the customer it names, for the key it came with. Installed by the
 * Service (src/identity builds it); throws `Unauthenticated` for a token it does not accept.
 */
export type CustomerResolver = (token: string, key: KeyPrincipal) => CustomerPrincipal | Promise<CustomerPrincipal>;

/**
 * A member's Studio session (auth/member-session-cookie.ts) → the member's principal in a project.
 * Installed by the Service (src/control builds it); throws `Unauthenticated` for a session that
 * is unknown, expired or revoked, `NotFound` for a project the member cannot open.
 */
export interface MemberSessions {
  principal(token: string, projectId: string | null): Promise<KeyPrincipal>;
}

export const CSRF_REQUIRED = 'Missing or invalid CSRF token: send the X-CSRF-Token header with the session cookie';

export type QueryParams = URLSearchParams | Record<string, string | undefined>;

export interface GateRequest {
  headers: HeaderSource;
  /** URL query parameters of a WebSocket upgrade or an EventSource request (see above). */
  params?: QueryParams | null;
  /** The request being served: its log line then names the key and the project. */
  request?: Request;
}

/** A caller that passed the rate limit, with the headers every response to it carries. */
export interface Admission extends RequestPrincipal {
  headers: Record<string, string>;
}

export interface GateOptions {
  keys: KeyResolver;
  limiter: RateLimiter;
  customers?: CustomerResolver | undefined;
  members?: MemberSessions | undefined;
  /** Told of every authenticated request that came with `request` (the request log). */
  onAuthenticated?: ((request: Request, key: KeyPrincipal) => void) | undefined;
  /** `SVC_METRICS_TOKEN`: GET /metrics then needs it as a Bearer token. */
  metricsToken?: string | undefined;
}

function paramOf(params: QueryParams | null | undefined, name: string): string | null {
  if (!params) return null;
  const v = params instanceof URLSearchParams ? params.get(name) : params[name];
  return typeof v === 'string' && v !== '' ? v : null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const WHITESPACE = /\s/;

/**
 * `Bearer <token>` → the token. (Kept here: auth sits below identity, which verifies it.) The
 * usual form, `Bearer` and one space, is taken without the anchored regex: 45 ns against 250 ns
 * for a 730-character token (Bun 1.4, this box), on every token-bearing request.
 */
function bearerToken(value: string): string | null {
  if (value.length > 7 && value.charCodeAt(6) === 32 && value.startsWith('Bearer')) {
    const token = value.slice(7);
    if (!WHITESPACE.test(token)) return token;
  }
  const m = BEARER.exec(value);
  return m ? m[1]! : null;
}

export class Gate {
  readonly keys: KeyResolver;
  readonly limiter: RateLimiter;
  #customers: CustomerResolver | undefined;
  #members: MemberSessions | undefined;
  readonly #onAuthenticated: GateOptions['onAuthenticated'];
  readonly #metricsToken: Buffer | undefined;
  #refusals = 0;

  constructor(opts: GateOptions) {
    this.keys = opts.keys;
    this.limiter = opts.limiter;
    this.#customers = opts.customers;
    this.#members = opts.members;
    this.#onAuthenticated = opts.onAuthenticated;
    this.#metricsToken = opts.metricsToken ? createHash('sha256').update(opts.metricsToken).digest() : undefined;
  }

  /**
   * GET /metrics: open when no SVC_METRICS_TOKEN is set, else `Authorization: Bearer <token>`
   * (compared in constant time). Throws UNAUTHENTICATED.
   */
  checkMetricsAccess(headers: HeaderSource): void {
    if (!this.#metricsToken) return;
    const auth = headerOf(headers, 'authorization');
    const given = auth === null ? null : bearerToken(auth);
    if (given !== null && safeEqual(createHash('sha256').update(given).digest(), this.#metricsToken)) return;
    throw new Unauthenticated(AUTH_REQUIRED, undefined, { 'www-authenticate': 'Bearer' });
  }

  /** Installs the customer-token resolver (the Service does, once identity provides one). */
  useCustomers(resolver: CustomerResolver | undefined): void {
    this.#customers = resolver;
  }

  /** Installs the member-session resolver (the Service does; src/control/member-access.ts). */
  useMembers(members: MemberSessions | undefined): void {
    this.#members = members;
  }

  /**
   * The member-session token of a request, or null without a session cookie. A request that
   * carries the cookie must prove it comes from a Studio page: `X-CSRF-Token` (or the `csrf`
   * parameter of a WebSocket upgrade) must match the session, else PERMISSION_DENIED.
   */
  sessionToken(req: Pick<GateRequest, 'headers' | 'params'>): string | null {
    const token = sessionTokenOf(headerOf(req.headers, 'cookie'));
    if (token === null) return null;
    if (!csrfMatches(token, headerOf(req.headers, CSRF_HEADER) ?? paramOf(req.params, CSRF_PARAM)))
      throw new PermissionDenied(CSRF_REQUIRED);
    return token;
  }

  /** Requests refused by the rate limit since start (metrics). */
  get refusals(): number {
    return this.#refusals;
  }

  /** Authenticates and counts one request: what REST routes and upgrades call. */
  async admit(req: GateRequest, cost = 1): Promise<Admission> {
    const caller = await this.authenticate(req);
    return { ...caller, headers: await this.charge(caller.key, cost) };
  }

  /**
   * The key and customer of a request, without counting it (GET /schema is not counted; the
   * GraphQL route counts after it has read the body, since a batch counts each operation).
   */
  async authenticate(req: GateRequest): Promise<RequestPrincipal> {
    return this.authenticateNow(req);
  }

  /**
   * authenticate() without a promise when everything it needs is in memory: a key value seen
   * before and no token, or a token verified before (the hot path of a read; each promise on it
   * was a microtask turn and an allocation). It may throw instead of rejecting.
   */
  authenticateNow(req: GateRequest): RequestPrincipal | Promise<RequestPrincipal> {
    // No API key but a member's session cookie: the Studio calling the public API as the member.
    const value = headerOf(req.headers, 'x-api-key') ?? paramOf(req.params, 'apiKey');
    if (this.#members && value === null) {
      const session = this.sessionToken(req);
      if (session !== null) return this.#member(req, session);
    }
    const key = this.keyNow(req, value);
    return key instanceof Promise ? key.then((k) => this.#withCustomer(req, k)) : this.#withCustomer(req, key);
  }

  async #member(req: GateRequest, session: string): Promise<RequestPrincipal> {
    const project = headerOf(req.headers, 'x-project-id') ?? paramOf(req.params, 'projectId');
    const key = await this.#members!.principal(session, project === null ? null : project.trim());
    if (req.request && this.#onAuthenticated) this.#onAuthenticated(req.request, key);
    return { key, customer: null };
  }

  #withCustomer(req: GateRequest, key: KeyPrincipal): RequestPrincipal | Promise<RequestPrincipal> {
    if (req.request && this.#onAuthenticated) this.#onAuthenticated(req.request, key);
    const auth = headerOf(req.headers, 'authorization');
    // An Authorization header that is no Bearer token is a token that does not verify.
    const token = auth !== null ? (bearerToken(auth) ?? '') : paramOf(req.params, 'token');
    if (token === null) return { key, customer: null };
    // Nobody to verify it (a gate built without identity): refuse rather than serve as the key.
    if (!this.#customers) throw new Unauthenticated(AUTH_REQUIRED);
    // A token this process verified before comes back synchronously: no promise on the hot path.
    const customer = this.#customers(token, key);
    return customer instanceof Promise ? customer.then((c) => ({ key, customer: c })) : { key, customer };
  }

  /**
   * Counts `cost` requests against the key's hourly limit (each operation of a batch is one)
   * and returns the rate-limit headers, or throws RATE_LIMITED carrying them and Retry-After.
   */
  async charge(key: Pick<KeyPrincipal, 'keyId'>, cost = 1): Promise<Record<string, string>> {
    return this.chargeNow(key, cost);
  }

  /** charge() without a promise but for the key's first request of a window in this process. May throw. */
  chargeNow(key: Pick<KeyPrincipal, 'keyId'>, cost = 1): Record<string, string> | Promise<Record<string, string>> {
    const d = this.allowNow(key, cost);
    return d instanceof Promise ? d.then(rateLimitHeaders) : rateLimitHeaders(d);
  }

  /**
   * The decision of an allowed request, for adapters that make the rate-limit headers themselves
   * (GraphQL over HTTP, from prepared headers); throws RATE_LIMITED as charge() does. No promise
   * but for the key's first request of a window in this process.
   */
  allowNow(key: Pick<KeyPrincipal, 'keyId'>, cost = 1): RateDecision | Promise<RateDecision> {
    const decision = this.take(key, cost);
    return decision instanceof Promise ? decision.then((d) => this.#allowed(d)) : this.#allowed(decision);
  }

  #allowed(decision: RateDecision): RateDecision {
    if (decision.allowed) return decision;
    this.#refusals++;
    const err = rateLimitError(decision);
    err.headers = { ...rateLimitHeaders(decision), 'retry-after': String(decision.retryAfter) };
    throw err;
  }

  /**
   * The raw decision (never throws). Returns the decision itself, no promise, unless this is the
   * key's first request of the window in this process: `await` works on both.
   */
  take(key: Pick<KeyPrincipal, 'keyId'>, cost = 1): RateDecision | Promise<RateDecision> {
    return this.limiter.take(key, cost, this.keys.rateLimitOf(key.keyId));
  }

  /**
   * Request → KeyPrincipal: missing, malformed, unknown, disabled, expired or deleted key →
   * UNAUTHENTICATED; a secret key from a browser or a public key from an origin off its list →
   * PERMISSION_DENIED `Insufficient permissions`; tenant keys need X-Project-Id (resolve.ts).
   */
  async authenticateKey(req: GateRequest): Promise<KeyPrincipal> {
    return this.keyNow(req);
  }

  /** authenticateKey() without a promise for a key value seen before (two Map reads). May throw. */
  keyNow(
    req: GateRequest,
    value = headerOf(req.headers, 'x-api-key') ?? paramOf(req.params, 'apiKey'),
  ): KeyPrincipal | Promise<KeyPrincipal> {
    if (!value) throw new Unauthenticated(AUTH_REQUIRED);
    // Hot path: a header value seen before maps straight to its cached entry (two Map reads, no
    // regex, no SHA-256). Only values that resolved to a stored key are remembered.
    const entry = this.keys.peekValue(value);
    return entry ? this.#principalOf(req, entry) : this.#lookupKey(req, value);
  }

  async #lookupKey(req: GateRequest, value: string): Promise<KeyPrincipal> {
    if (value.length > MAX_HEADER) throw new Unauthenticated(AUTH_REQUIRED);
    const trimmed = value.trim();
    if (!kindOfKey(trimmed)) throw new Unauthenticated(AUTH_REQUIRED);
    const hash = hashSecret(trimmed);
    const resolver = this.keys;
    const entry = resolver.peek(hash) ?? (await resolver.lookupHash(hash));
    if (entry.row) resolver.rememberValue(value, hash);
    return this.#principalOf(req, entry);
  }

  #principalOf(req: GateRequest, entry: CachedKey): KeyPrincipal {
    const { headers, params } = req;
    const row = entry.row;
    if (!row || !isLive(row)) throw new Unauthenticated(AUTH_REQUIRED);
    if (!isPublicKey(row.kind)) {
      // Secret keys are server-side only: anything a browser stamps on its requests refuses them.
      if (headerOf(headers, 'origin') !== null || headerOf(headers, 'sec-fetch-site') !== null)
        throw new PermissionDenied(INSUFFICIENT);
    } else if (row.allowed_origins && row.allowed_origins.length > 0) {
      // A domain-restricted key needs a matching Origin; without one there is nothing to match.
      const origin = headerOf(headers, 'origin');
      if (origin === null || origin.length > MAX_HEADER || !originAllowed(origin, row.allowed_origins)) {
        throw new PermissionDenied(INSUFFICIENT);
      }
    }
    // Project-bound keys ignore X-Project-Id entirely: only tenant keys read it.
    if (!isTenantKey(row.kind)) return this.keys.principalOf(entry, null);
    const project = headerOf(headers, 'x-project-id') ?? paramOf(params, 'projectId');
    return this.keys.principalOf(entry, project === null ? null : project.trim());
  }

  /** Flushes the rate limiter's last counts and lets go of the bus; part of Service.close. */
  async close(): Promise<void> {
    this.keys.close();
    await this.limiter.stop();
  }
}
