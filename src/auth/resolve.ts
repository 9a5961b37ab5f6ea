import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { BadUserInput, PermissionDenied, Unauthenticated } from '../errors.ts';
import { hashSecret } from '../ids.ts';
import { findKeyByHash, type StoredKey } from './api-keys.ts';
import { isPublicKey, isTenantKey, type KeyPrincipal } from './principal.ts';
import { DEFAULT_RATE_LIMIT } from './rate-limit.ts';

/**
 * The key cache: `x-api-key` value → stored key → KeyPrincipal (src/auth/gate.ts applies the
 * request rules on top). Spec errors: missing, malformed, unknown, disabled, expired or deleted
 * key → UNAUTHENTICATED `Authentication required`; tenant key without X-Project-Id → 400, with
 * a project off its list → 403; secret key from a browser and public key from an origin off
 * its list → PERMISSION_DENIED `Insufficient permissions`.
 *
 * Keys are cached in memory by hash. Every key change publishes `key.changed` on the bus, which
 * drops the entry in every process within a NOTIFY round trip; that is what makes a disable
 * visible everywhere within a second. Notifications are only lost while the LISTEN connection
 * is down, and its reconnect flushes the whole cache. Beyond that, a known key is revalidated
 * in the background once a minute (never blocking the request); expiry needs no reload, it is
 * checked against the cached `expires_at` on every request.
 */
export const AUTH_REQUIRED = 'Authentication required';
export const TENANT_HEADER_REQUIRED = 'X-Project-Id is required for a tenant API key';
export const TENANT_PROJECT_NOT_ALLOWED = "X-Project-Id is not on the key's project allow-list";

/** Longest header value we even look at; anything longer cannot be a key or a project id. */
export const MAX_HEADER = 256;

export function fingerprintOf(k: Pick<KeyPrincipal, 'kind' | 'scopes' | 'allowedModels'>): string {
  const h = createHash('sha256');
  h.update(isPublicKey(k.kind) ? 'public' : 'secret');
  h.update('\0' + [...k.scopes].sort().join(','));
  h.update('\0' + (k.allowedModels ? [...k.allowedModels].sort().join(',') : '*'));
  return h.digest('hex').slice(0, 24);
}

export function isLive(row: StoredKey, now = Date.now()): boolean {
  return !row.disabled_at && !row.deleted_at && !(row.expires_at && row.expires_at.getTime() <= now);
}

/** Kept for callers holding a row already; Gate.authenticate is the usual entry point. */
export function principalFromRow(row: StoredKey, projectHeader: string | null | undefined): KeyPrincipal {
  if (!isLive(row)) throw new Unauthenticated(AUTH_REQUIRED);
  const base = {
    kind: row.kind,
    scopes: new Set(row.scopes) as ReadonlySet<string>,
    allowedModels: row.allowed_models,
  };
  return {
    keyId: row.id,
    tenantId: row.tenant_id,
    projectId: projectFor(row, projectHeader),
    allowedFileTypes: row.allowed_file_types,
    documents: row.documents,
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

export interface CachedKey {
  /** null: no such key (negative entry, short-lived). */
  row: StoredKey | null;
  loadedAt: number;
  reloading: Promise<void> | undefined;
  /** One principal per project served, built once: scopes set and fingerprint included. */
  principals: Map<string, KeyPrincipal>;
}

export interface ResolverOptions {
  /**
   * After this age a known key is revalidated in the background while still served (never
   * blocking). Only a safety net: changes arrive as `key.changed` and reconnects flush.
   */
  ttlMs?: number;
  /** After this age an unknown-key (negative) entry is reloaded before answering. */
  negativeTtlMs?: number;
  maxEntries?: number;
}

export const KEY_TTL_MS = 60_000;
export const NEGATIVE_TTL_MS = 1_000;

export class KeyResolver {
  readonly #sql: Sql;
  readonly #byHash = new Map<string, CachedKey>();
  readonly #hashById = new Map<string, string>();
  /** Raw `x-api-key` values of stored keys → their hash (process memory only, never stored). */
  readonly #hashByValue = new Map<string, string>();
  readonly #ttl: number;
  readonly #negativeTtl: number;
  readonly #max: number;
  /** Bumped on every invalidation: a load that started before it must not be cached. */
  #epoch = 0;
  #loads = 0;
  readonly #unsubscribe: () => void;
  readonly #unsubscribeReconnect: () => void;

  constructor(sql: Sql, bus: EventBus, opts: ResolverOptions = {}) {
    this.#sql = sql;
    this.#ttl = opts.ttlMs ?? KEY_TTL_MS;
    this.#negativeTtl = opts.negativeTtlMs ?? NEGATIVE_TTL_MS;
    this.#max = opts.maxEntries ?? 100_000;
    this.#unsubscribe = bus.subscribe((e) => {
      if (e.type === 'key.changed') this.invalidate(e.keyId, e.keyHash);
    });
    // Notifications sent while the LISTEN connection was down are lost: start over.
    this.#unsubscribeReconnect = bus.onReconnect(() => this.flush());
  }

  invalidate(keyId: string, keyHash: string | null): void {
    this.#epoch++;
    const h = keyHash ?? this.#hashById.get(keyId);
    if (h) this.#byHash.delete(h);
    this.#hashById.delete(keyId);
  }

  /** Drops every cached key (the bus reconnected, so invalidations may have been missed). */
  flush(): void {
    this.#epoch++;
    this.#byHash.clear();
    this.#hashById.clear();
  }

  /** Key queries this resolver has made (diagnostics, bench/auth-cost.ts). */
  get loads(): number {
    return this.#loads;
  }

  /** Number of cached entries (tests, diagnostics). */
  get size(): number {
    return this.#byHash.size;
  }

  close(): void {
    this.#unsubscribe();
    this.#unsubscribeReconnect();
    this.#byHash.clear();
    this.#hashById.clear();
    this.#hashByValue.clear();
  }

  /** The configured hourly limit of a key this process has resolved. */
  rateLimitOf(keyId: string): number {
    const h = this.#hashById.get(keyId);
    return (h && this.#byHash.get(h)?.row?.rate_limit) || DEFAULT_RATE_LIMIT;
  }

  /**
   * The cached entry for a key hash when it can be answered from memory (a known key, however
   * old: past the TTL one background revalidation starts), else undefined.
   */
  peek(hash: string): CachedKey | undefined {
    const hit = this.#byHash.get(hash);
    if (!hit) return undefined;
    const age = Date.now() - hit.loadedAt;
    if (hit.row) {
      if (age >= this.#ttl && !hit.reloading) {
        // On success the map holds a fresh entry; either way this one may try again later.
        hit.reloading = this.#load(hash).then(
          () => {
            hit.reloading = undefined;
          },
          () => {
            hit.reloading = undefined;
          },
        );
      }
      return hit;
    }
    return age < this.#negativeTtl ? hit : undefined;
  }

  /** The stored key for a well-formed value, from memory when possible; null when unknown. */
  async lookup(value: string): Promise<CachedKey> {
    const hash = hashSecret(value);
    return this.peek(hash) ?? this.#load(hash);
  }

  /** The entry for a raw header value remembered by rememberValue, when servable from memory. */
  peekValue(value: string): CachedKey | undefined {
    const hash = this.#hashByValue.get(value);
    return hash === undefined ? undefined : this.peek(hash);
  }

  /**
   * Remembers value → hash for a value that resolved to a stored key, so the next request skips
   * the format check and the SHA-256. The hash of a value never changes: nothing to invalidate.
   */
  rememberValue(value: string, hash: string): void {
    if (this.#hashByValue.size >= this.#max) this.#hashByValue.clear();
    this.#hashByValue.set(value, hash);
  }

  /** Same as lookup for a value already hashed (the request path hashes once). */
  lookupHash(hash: string): CachedKey | Promise<CachedKey> {
    return this.peek(hash) ?? this.#load(hash);
  }

  async #load(hash: string): Promise<CachedKey> {
    const epoch = this.#epoch;
    this.#loads++;
    const row = await findKeyByHash(this.#sql, hash);
    const entry: CachedKey = { row, loadedAt: Date.now(), reloading: undefined, principals: new Map() };
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
    if (m && o.protocol === m[1] && o.hostname.endsWith(`.${m[2]}`) && (o.port ? `:${o.port}` : '') === (m[3] ?? ''))
      return true;
  }
  return false;
}
