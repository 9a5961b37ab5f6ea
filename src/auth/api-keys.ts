import type { Sql } from '../store/db.ts';
import { hashSecret, newId } from '../ids.ts';
import { randomBytes } from 'node:crypto';
import type { DocumentPolicy, KeyKind } from './principal.ts';
import { isPublicKey, isTenantKey } from './principal.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import type { EventBus } from '../bus/bus.ts';

/**
 * Where key changes are announced: the bus itself, or (inside a larger transaction such as a
 * config push) a collector whose events the caller announces with its commit.
 */
export type KeyAnnouncer = Pick<EventBus, 'publish'>;
import { MODEL_KEY_RE, parseScopes } from './scopes.ts';
import { pgInstant } from '../store/instant.ts';

/**
 * API key issuance and storage. Values are `pk_`, `sk_`, `pk_t_`, `sk_t_` plus 48 hex
 * characters; only their SHA-256 is stored, so a lookup is one indexed equality.
 * `createApiKey` validates a definition (grants per key kind live with the scope rules in
 * scopes.ts); `insertApiKey` stores one as given.
 */
export interface NewKeyInput {
  tenantId: string;
  /** Project-bound keys: the project. Tenant keys: null, with `projectIds`. */
  projectId: string | null;
  kind: KeyKind;
  name: string;
  scopes: string[];
  allowedModels?: string[] | null;
  allowedFileTypes?: string[] | null;
  projectIds?: string[];
  allowedOrigins?: string[] | null;
  rateLimit?: number | null;
  expiresAt?: Date | null;
  documents?: DocumentPolicy | null;
}

export interface StoredKey {
  id: string;
  tenant_id: string;
  project_id: string | null;
  kind: KeyKind;
  name: string;
  key_hint: string;
  scopes: string[];
  allowed_models: string[] | null;
  allowed_file_types: string[] | null;
  project_ids: string[];
  allowed_origins: string[] | null;
  rate_limit: number | null;
  documents: DocumentPolicy | null;
  expires_at: Date | null;
  disabled_at: Date | null;
  deleted_at: Date | null;
}

export function keyPrefix(kind: KeyKind): string {
  return `${kind}_`;
}

export function kindOfKey(value: string): KeyKind | null {
  const m = /^(pk_t|sk_t|pk|sk)_[0-9a-f]{48}$/.exec(value);
  return m ? (m[1] as KeyKind) : null;
}

export async function insertApiKey(sql: Sql, input: NewKeyInput): Promise<{ id: string; key: string }> {
  const key = keyPrefix(input.kind) + randomBytes(24).toString('hex');
  const id = newId('key');
  await sql`insert into api_keys (id, tenant_id, project_id, kind, name, key_hash, key_hint, scopes, allowed_models,
              allowed_file_types, project_ids, allowed_origins, rate_limit, expires_at, documents)
            values (${id}, ${input.tenantId}, ${input.projectId}, ${input.kind}, ${input.name}, ${hashSecret(key)},
              ${key.slice(0, key.lastIndexOf('_') + 5)}, ${input.scopes}, ${input.allowedModels ?? null},
              ${input.allowedFileTypes ?? null}, ${input.projectIds ?? []}, ${input.allowedOrigins ?? null},
              ${input.rateLimit ?? null}, ${input.expiresAt ?? null}, ${input.documents ?? null})`;
  return { id, key };
}

/** The stored key with this value's hash (one unique-index probe), or null. */
export async function findKeyByHash(sql: Sql, hash: string): Promise<StoredKey | null> {
  const [row] = await sql<StoredKey[]>`
    select id, tenant_id, project_id, kind, name, key_hint, scopes, allowed_models, allowed_file_types, project_ids,
           allowed_origins, rate_limit, documents, expires_at, disabled_at, deleted_at
    from api_keys where key_hash = ${hash}`;
  return row ?? null;
}

/* ---------------------------------------------------------------------------------------------
 * Validated creation and lifecycle. Every change publishes `key.changed` so each process drops
 * its cached resolution of the key (src/auth/resolve.ts) at once.
 * ------------------------------------------------------------------------------------------- */

export interface CreateKeyInput {
  tenantId: string;
  kind: KeyKind;
  name: unknown;
  scopes: unknown;
  /** Project-bound keys: required, a project of `tenantId`. Tenant keys: must be absent. */
  projectId?: string | null;
  /** Tenant keys: the allow-list, fixed at creation, every project within `tenantId`. */
  projectIds?: unknown;
  allowedModels?: unknown;
  allowedOrigins?: unknown;
  rateLimit?: unknown;
  expiresAt?: unknown;
  documents?: unknown;
}

/** What listings show: never the key value, only its hint. */
export interface KeySummary {
  id: string;
  name: string;
  kind: KeyKind;
  hint: string;
  projectId: string | null;
  projectIds: string[];
  scopes: string[];
  allowedModels: string[] | null;
  allowedOrigins: string[] | null;
  rateLimit: number | null;
  /** null: the project's `documentPolicy` (default `any`). */
  documents: DocumentPolicy | null;
  expiresAt: string | null;
  disabled: boolean;
  createdAt: string;
}

export const KEY_KINDS: readonly KeyKind[] = ['pk', 'sk', 'pk_t', 'sk_t'];
const MAX_RATE_LIMIT = 1_000_000_000;

function checkKeyName(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw new BadUserInput('name is required');
  const name = value.trim();
  if (name.length > 200) throw new BadUserInput('name must be at most 200 characters');
  return name;
}

function stringList(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw new BadUserInput(`${what} must be a list of strings`);
  return [...new Set(value as string[])];
}

function checkModels(value: unknown): string[] | null {
  if (value === undefined || value === null) return null;
  const models = stringList(value, 'models');
  if (models.length === 0) throw new BadUserInput('models must name at least one model (leave it out for all models)');
  for (const m of models) {
    if (!MODEL_KEY_RE.test(m)) throw new BadUserInput(`models: ${JSON.stringify(m.slice(0, 80))} is not a model key`);
  }
  return models;
}

/**
 * Allowed origins are exact browser origins (`https://shop.example`, optional port) or one
 * leading subdomain wildcard (`https://*.example.com`). Stored normalised, without a path.
 */
export function normaliseOrigin(value: string): string {
  const m = /^(https?):\/\/(\*\.)?([a-z0-9.-]+)(:\d{1,5})?\/?$/i.exec(value.trim());
  if (!m || m[3]!.startsWith('.') || m[3]!.endsWith('.') || m[3]!.includes('..')) {
    throw new BadUserInput(
      `origins: ${JSON.stringify(value.slice(0, 80))} is not an origin like https://shop.example.com`,
    );
  }
  return `${m[1]!.toLowerCase()}://${m[2] ?? ''}${m[3]!.toLowerCase()}${m[4] ?? ''}`;
}

function checkOrigins(value: unknown): string[] | null {
  if (value === undefined || value === null) return null;
  const list = stringList(value, 'origins').map(normaliseOrigin);
  return list.length === 0 ? null : [...new Set(list)];
}

function checkRateLimit(value: unknown): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_RATE_LIMIT) {
    throw new BadUserInput(`rateLimit must be a whole number of requests per hour between 1 and ${MAX_RATE_LIMIT}`);
  }
  return value;
}

const POLICIES: readonly DocumentPolicy[] = ['any', 'apq', 'trusted-only'];

/** A key's document policy (docs/documents.md); null or absent: the project's setting. */
export function checkDocumentPolicy(value: unknown): DocumentPolicy | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !POLICIES.includes(value as DocumentPolicy))
    throw new BadUserInput('documents must be "any", "apq" or "trusted-only"');
  return value as DocumentPolicy;
}

function checkExpiry(value: unknown): Date | null {
  if (value === undefined || value === null) return null;
  const d = typeof value === 'string' || typeof value === 'number' ? new Date(value) : null;
  if (!d || Number.isNaN(d.getTime())) throw new BadUserInput('expiresAt must be an ISO 8601 date-time');
  if (d.getTime() <= Date.now()) throw new BadUserInput('expiresAt must be in the future');
  if (!pgInstant(d)) throw new BadUserInput('expiresAt must be before the year 10000');
  return d;
}

async function publishChange(bus: KeyAnnouncer, keyId: string, keyHash: string | null): Promise<void> {
  await bus.publish({ type: 'key.changed', keyId, keyHash });
}

/** Validates a key definition against its kind and tenant, then stores it. */
export async function createApiKey(
  sql: Sql,
  bus: KeyAnnouncer,
  input: CreateKeyInput,
): Promise<{ id: string; key: string }> {
  if (!KEY_KINDS.includes(input.kind)) throw new BadUserInput('type must be public or secret');
  const name = checkKeyName(input.name);
  const scopes = parseScopes(input.kind, input.scopes);
  const allowedModels = checkModels(input.allowedModels);
  const allowedOrigins = checkOrigins(input.allowedOrigins);
  if (allowedOrigins && !isPublicKey(input.kind)) {
    throw new BadUserInput('origins apply to public keys only: secret keys are refused from browsers altogether');
  }
  const rateLimit = checkRateLimit(input.rateLimit);
  const expiresAt = checkExpiry(input.expiresAt);
  const documents = checkDocumentPolicy(input.documents);
  let projectId: string | null = null;
  let projectIds: string[] = [];
  if (isTenantKey(input.kind)) {
    if (input.projectId)
      throw new BadUserInput('a tenant key takes a project allow-list (projects), not a single project');
    projectIds = stringList(input.projectIds ?? [], 'projects');
    if (projectIds.length === 0) throw new BadUserInput('a tenant key needs a project allow-list (projects)');
    const found = await sql<{ id: string }[]>`
      select id from projects where id = any(${projectIds}) and tenant_id = ${input.tenantId}`;
    const missing = projectIds.filter((p) => !found.some((r) => r.id === p));
    if (missing.length > 0)
      throw new BadUserInput(`projects: ${missing.slice(0, 5).join(', ')} not found in this tenant`);
  } else {
    if (input.projectIds !== undefined && input.projectIds !== null) {
      throw new BadUserInput('a project allow-list (projects) is only for tenant keys (--tenant)');
    }
    if (!input.projectId) throw new BadUserInput('a project-bound key needs a project');
    const [row] = await sql<
      { id: string }[]
    >`select id from projects where id = ${input.projectId} and tenant_id = ${input.tenantId}`;
    if (!row) throw new NotFound('Project not found');
    projectId = row.id;
  }
  const created = await insertApiKey(sql, {
    tenantId: input.tenantId,
    projectId,
    kind: input.kind,
    name,
    scopes,
    allowedModels,
    projectIds,
    allowedOrigins,
    rateLimit,
    expiresAt,
    documents,
  });
  // A process may have remembered this hash as unknown; tell every process.
  await publishChange(bus, created.id, hashSecret(created.key));
  return created;
}

interface KeyRow extends StoredKey {
  created_at: Date;
}

function summary(r: KeyRow): KeySummary {
  return {
    id: r.id,
    name: r.name,
    kind: r.kind,
    hint: `${r.key_hint}…`,
    projectId: r.project_id,
    projectIds: r.project_ids,
    scopes: r.scopes,
    allowedModels: r.allowed_models,
    allowedOrigins: r.allowed_origins,
    rateLimit: r.rate_limit,
    documents: r.documents,
    expiresAt: r.expires_at ? r.expires_at.toISOString() : null,
    disabled: r.disabled_at !== null,
    createdAt: r.created_at.toISOString(),
  };
}

/** Keys of a tenant, optionally only those serving one project (bound to it or allow-listing it). */
/** The project a key belongs to (null for a tenant key or an unknown id). */
export async function projectOfKey(sql: Sql, keyId: string): Promise<string | null> {
  const [row] = await sql<{ project_id: string | null }[]>`select project_id from api_keys where id = ${keyId}`;
  return row?.project_id ?? null;
}

export async function listApiKeys(sql: Sql, tenantId: string, projectId?: string | null): Promise<KeySummary[]> {
  const rows = await sql<KeyRow[]>`
    select * from api_keys
    where tenant_id = ${tenantId} and deleted_at is null
      ${projectId ? sql`and (project_id = ${projectId} or ${projectId} = any(project_ids))` : sql``}
    order by created_at, id`;
  return rows.map(summary);
}

/** One live (not deleted) key of a tenant, or NotFound — keys of other tenants look absent. */
export async function getApiKey(sql: Sql, tenantId: string, keyId: unknown): Promise<KeySummary> {
  if (typeof keyId !== 'string' || !/^key_[0-9a-f]{1,64}$/.test(keyId)) throw new NotFound('API key not found');
  const [row] = await sql<
    KeyRow[]
  >`select * from api_keys where id = ${keyId} and tenant_id = ${tenantId} and deleted_at is null`;
  if (!row) throw new NotFound('API key not found');
  return summary(row);
}

export interface KeyUpdate {
  name?: unknown;
  allowedOrigins?: unknown;
  rateLimit?: unknown;
  expiresAt?: unknown;
  disabled?: unknown;
  documents?: unknown;
}

/**
 * Changes the mutable settings of a key. Scopes, models and the project allow-list are fixed
 * at creation (rotate to change them). `null` clears origins, rate limit or expiry.
 */
export async function updateApiKey(
  sql: Sql,
  bus: KeyAnnouncer,
  tenantId: string,
  keyId: string,
  patch: KeyUpdate,
): Promise<KeySummary> {
  const current = await getApiKey(sql, tenantId, keyId);
  const set: Record<string, unknown> = {};
  if (patch.name !== undefined) set.name = checkKeyName(patch.name);
  if (patch.allowedOrigins !== undefined) {
    const origins = checkOrigins(patch.allowedOrigins);
    if (origins && !isPublicKey(current.kind)) throw new BadUserInput('origins apply to public keys only');
    set.allowed_origins = origins;
  }
  if (patch.rateLimit !== undefined) set.rate_limit = checkRateLimit(patch.rateLimit);
  if (patch.expiresAt !== undefined) set.expires_at = checkExpiry(patch.expiresAt);
  if (patch.documents !== undefined) set.documents = checkDocumentPolicy(patch.documents);
  if (patch.disabled !== undefined) {
    if (typeof patch.disabled !== 'boolean') throw new BadUserInput('disabled must be true or false');
    set.disabled_at = patch.disabled ? (current.disabled ? undefined : new Date()) : null;
    if (set.disabled_at === undefined) delete set.disabled_at;
  }
  if (Object.keys(set).length === 0) return current;
  const [row] = await sql<KeyRow[]>`
    update api_keys set ${sql(set as Record<string, never>)}, updated_at = now()
    where id = ${keyId} and tenant_id = ${tenantId} and deleted_at is null
    returning *`;
  if (!row) throw new NotFound('API key not found');
  await publishChange(bus, row.id, rowHash(row));
  return summary(row);
}

/**
 * Deletes a key for good: it stops authenticating and leaves listings. The row is kept
 * (tombstoned) so the hash can never be re-issued and audit references still resolve.
 */
export async function deleteApiKey(
  sql: Sql,
  bus: KeyAnnouncer,
  tenantId: string,
  keyId: string,
): Promise<{ id: string; deleted: true }> {
  await getApiKey(sql, tenantId, keyId);
  const [row] = await sql<{ id: string; key_hash: string }[]>`
    update api_keys set deleted_at = now(), updated_at = now()
    where id = ${keyId} and tenant_id = ${tenantId} and deleted_at is null
    returning id, key_hash`;
  if (!row) throw new NotFound('API key not found');
  await publishChange(bus, row.id, row.key_hash);
  return { id: row.id, deleted: true };
}

function rowHash(row: KeyRow): string | null {
  return (row as unknown as { key_hash?: string }).key_hash ?? null;
}
