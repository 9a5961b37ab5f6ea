import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { EventBus } from '../actors/bus.ts';
import type { Service } from '../service.ts';
import { BadUserInput, PermissionDenied, Unauthenticated } from '../errors.ts';
import { hashSecret } from '../ids.ts';
import { findKeyByValue, kindOfKey, type StoredKey } from './keys.ts';
import { isPublicKey, isTenantKey, type KeyPrincipal } from './principal.ts';
import { DEFAULT_RATE_LIMIT, RateLimiter, type RateDecision } from './rate-limit.ts';
import { INSUFFICIENT } from './scopes.ts';

/**
 * Request → KeyPrincipal. Spec errors: missing, malformed, unknown, disabled, expired or deleted
 * key → UNAUTHENTICATED `Authentication required`; tenant key without X-Project-Id → 400, with
 * a project off its list → 403; secret key from a browser and public key from an origin off
 * its list → PERMISSION_DENIED `Insufficient permissions`.
 *
 * Keys are cached in memory by hash. Every key change publishes `key.changed` on the bus, which
 * drops the entry in every process within a NOTIFY round trip; a half-second TTL (served stale
 * while one background reload runs) bounds staleness if a notification is ever lost.
 */
export const AUTH_REQUIRED = 'Authentication required';
export const TENANT_HEADER_REQUIRED = 'X-Project-Id is required for a tenant API key';
export const TENANT_PROJECT_NOT_ALLOWED = "X-Project-Id is not on the key's project allow-list";

/** Longest header value we even look at; anything longer cannot be a key or a project id. */
const MAX_HEADER = 256;

export function fingerprintOf(k: Pick<KeyPrincipal, 'kind' | 'scopes' | 'allowedModels'>): string {
  const h = createHash('sha256');
  h.update(isPublicKey(k.kind) ? 'public' : 'secret');
  h.update('\0' + [...k.scopes].sort().join(','));
  h.update('\0' + (k.allowedModels ? [...k.allowedModels].sort().join(',') : '*'));
  return h.digest('hex').slice(0, 24);
}

function isLive(row: StoredKey, now = Date.now()): boolean {
  return !row.disabled_at && !row.deleted_at && !(row.expires_at && row.expires_at.getTime() <= now);
}

/** Kept for callers holding a row already; authenticateRequest is the usual entry point. */
export function principalFromRow(row: StoredKey, projectHeader: string | null | undefined): KeyPrincipal {
  if (!isLive(row)) throw new Unauthenticated(AUTH_REQUIRED);
  const base = { kind: row.kind, scopes: new Set(row.scopes) as ReadonlySet<string>, allowedModels: row.allowed_models };
  return {
    keyId: row.id,
    tenantId: row.tenant_id,
    projectId: projectFor(row, projectHeader),
    allowedFileTypes: row.allowed_file_types,
    ...base,
    fingerprint: fingerprintOf(base),
  };
}

function projectFor(row: StoredKey, projectHeader: string | null | undefined): string {
  // Project-bound keys ignore the header entirely (spec "API keys" rule 2).
  if (!isTenantKey(row.kind)) return row.project_id!;
  if (!projectHeader) throw new BadUserInput(TENANT_HEADER_REQUIRED);
  if (projectHeader.length > MAX_HEADER || !row.project_ids.includes(projectHeader)) {
    throw new PermissionDenied(TENANT_PROJECT_NOT_ALLOWED);
  }
  return projectHeader;
}

/** Uncached resolution (one indexed query); tests and one-off tools. */
export async function resolveKey(sql: Sql, apiKey: string | null | undefined, projectHeader: string | null | undefined): Promise<KeyPrincipal> {
  if (!apiKey || apiKey.length > MAX_HEADER || !kindOfKey(apiKey)) throw new Unauthenticated(AUTH_REQUIRED);
  const row = await findKeyByValue(sql, apiKey);
  if (!row) throw new Unauthenticated(AUTH_REQUIRED);
  return principalFromRow(row, projectHeader);
}

interface CachedKey {
  /** null: no such key (negative entry, short-lived). */
  row: StoredKey | null;
  loadedAt: number;
  reloading: Promise<void> | undefined;
  /** One principal per project served, built once: scopes set and fingerprint included. */
  principals: Map<string, KeyPrincipal>;
}

export interface ResolverOptions {
  /** After this age an entry is reloaded in the background while still served. */
  ttlMs?: number;
  /** After this age an entry is not served until reloaded. */
  hardTtlMs?: number;
  maxEntries?: number;
}

export class KeyResolver {
  readonly #sql: Sql;
  readonly #byHash = new Map<string, CachedKey>();
  readonly #hashById = new Map<string, string>();
  readonly #ttl: number;
  readonly #hardTtl: number;
  readonly #max: number;
  /** Bumped on every invalidation: a load that started before it must not be cached. */
  #epoch = 0;
  readonly #unsubscribe: () => void;

  constructor(sql: Sql, bus: EventBus, opts: ResolverOptions = {}) {
    this.#sql = sql;
    this.#ttl = opts.ttlMs ?? 500;
    this.#hardTtl = opts.hardTtlMs ?? 5000;
    this.#max = opts.maxEntries ?? 100_000;
    this.#unsubscribe = bus.subscribe((e) => {
      if (e.type === 'key.changed') this.invalidate(e.keyId, e.keyHash);
    });
  }

  invalidate(keyId: string, keyHash: string | null): void {
    this.#epoch++;
    const h = keyHash ?? this.#hashById.get(keyId);
    if (h) this.#byHash.delete(h);
    this.#hashById.delete(keyId);
  }

  close(): void {
    this.#unsubscribe();
    this.#byHash.clear();
    this.#hashById.clear();
  }

  /** The configured hourly limit of a key this process has resolved. */
  rateLimitOf(keyId: string): number {
    const h = this.#hashById.get(keyId);
    return (h && this.#byHash.get(h)?.row?.rate_limit) || DEFAULT_RATE_LIMIT;
  }

  /** The stored key for a well-formed value, from memory when possible; null when unknown. */
  async lookup(value: string): Promise<CachedKey> {
    const hash = hashSecret(value);
    const now = Date.now();
    const hit = this.#byHash.get(hash);
    if (hit) {
      const age = now - hit.loadedAt;
      if (age < this.#ttl) return hit;
      if (age < this.#hardTtl && hit.row) {
        hit.reloading ??= this.#load(hash).then(
          () => undefined,
          () => undefined,
        );
        return hit;
      }
    }
    return this.#load(hash);
  }

  async #load(hash: string): Promise<CachedKey> {
    const epoch = this.#epoch;
    const [row] = await this.#sql<StoredKey[]>`
      select id, tenant_id, project_id, kind, name, key_hint, scopes, allowed_models, allowed_file_types, project_ids,
             allowed_origins, rate_limit, expires_at, disabled_at, deleted_at
      from api_keys where key_hash = ${hash}`;
    const entry: CachedKey = { row: row ?? null, loadedAt: Date.now(), reloading: undefined, principals: new Map() };
    if (epoch === this.#epoch) {
      if (this.#byHash.size >= this.#max) {
        const oldest = this.#byHash.keys().next().value;
        if (oldest !== undefined) this.#byHash.delete(oldest);
      }
      this.#byHash.delete(hash);
      this.#byHash.set(hash, entry);
      if (row) this.#hashById.set(row.id, hash);
    }
    return entry;
  }

  principalOf(entry: CachedKey, projectHeader: string | null): KeyPrincipal {
    const row = entry.row!;
    const projectId = projectFor(row, projectHeader);
    let p = entry.principals.get(projectId);
    if (!p) {
      p = principalFromRow(row, projectId);
      entry.principals.set(projectId, p);
    }
    return p;
  }
}

export type HeaderSource = Headers | Record<string, string | string[] | undefined | null>;

/** Case-insensitive single header read over Fetch `Headers` or a plain record. */
export function headerOf(headers: HeaderSource, name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  let v = headers[name];
  if (v === undefined) {
    const found = Object.keys(headers).find((k) => k.toLowerCase() === name);
    v = found === undefined ? undefined : headers[found];
  }
  if (Array.isArray(v)) v = v[0];
  return typeof v === 'string' ? v : null;
}

/** Origin matching for public keys: exact origins, or `scheme://*.domain[:port]` for subdomains. */
export function originAllowed(origin: string, allowed: readonly string[]): boolean {
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return false;
  }
  const norm = `${o.protocol}//${o.host}`;
  for (const a of allowed) {
    if (a === norm) return true;
    const m = /^(https?:)\/\/\*\.([^:]+)(:\d+)?$/.exec(a);
    if (m && o.protocol === m[1] && o.hostname.endsWith(`.${m[2]}`) && (o.port ? `:${o.port}` : '') === (m[3] ?? '')) return true;
  }
  return false;
}

export interface AuthState {
  resolver: KeyResolver;
  limiter: RateLimiter;
}

const states = new WeakMap<Service, AuthState>();

/** The per-process key cache and rate limiter of a Service, created on first use. */
export function authState(svc: Pick<Service, 'sql' | 'bus'>): AuthState {
  const s = svc as Service;
  let st = states.get(s);
  if (!st) {
    st = { resolver: new KeyResolver(svc.sql, svc.bus), limiter: new RateLimiter(svc.sql) };
    states.set(s, st);
  }
  return st;
}

/**
 * The one entry point for every surface (REST, GraphQL over HTTP, WebSocket connection params,
 * provisioning): pass the request headers (for WebSocket, a record with `x-api-key` set from
 * `apiKey` plus the upgrade request's Origin / Sec-Fetch-Site). Throws SvcErrors of the table.
 */
export async function authenticateRequest(svc: Pick<Service, 'sql' | 'bus'>, headers: HeaderSource): Promise<KeyPrincipal> {
  const value = headerOf(headers, 'x-api-key');
  if (!value || value.length > MAX_HEADER) throw new Unauthenticated(AUTH_REQUIRED);
  const trimmed = value.trim();
  if (!kindOfKey(trimmed)) throw new Unauthenticated(AUTH_REQUIRED);
  const { resolver } = authState(svc);
  const entry = await resolver.lookup(trimmed);
  const row = entry.row;
  if (!row || !isLive(row)) throw new Unauthenticated(AUTH_REQUIRED);
  const origin = headerOf(headers, 'origin');
  if (!isPublicKey(row.kind)) {
    // Secret keys are server-side only: anything a browser stamps on its requests refuses them.
    if (origin !== null || headerOf(headers, 'sec-fetch-site') !== null) throw new PermissionDenied(INSUFFICIENT);
  } else if (row.allowed_origins && row.allowed_origins.length > 0) {
    // A domain-restricted key needs a matching Origin; without one there is nothing to match.
    if (origin === null || origin.length > MAX_HEADER || !originAllowed(origin, row.allowed_origins)) {
      throw new PermissionDenied(INSUFFICIENT);
    }
  }
  const project = headerOf(headers, 'x-project-id');
  return resolver.principalOf(entry, project === null ? null : project.trim());
}

/**
 * Counts `n` requests for the principal's key against its hourly limit (each operation of a
 * batched GraphQL request is one). Never throws: check `allowed`, send `rateLimitHeaders(d)`
 * on every response and `rateLimitError(d)` when refused.
 */
export function takeRateLimit(svc: Pick<Service, 'sql' | 'bus'>, principal: Pick<KeyPrincipal, 'keyId'>, n = 1): Promise<RateDecision> {
  const { resolver, limiter } = authState(svc);
  return limiter.take(principal, n, resolver.rateLimitOf(principal.keyId));
}
