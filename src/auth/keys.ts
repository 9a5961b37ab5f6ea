import type { Sql } from '../store/db.ts';
import { hashSecret, newId } from '../ids.ts';
import { randomBytes } from 'node:crypto';
import type { KeyKind } from './principal.ts';

/**
 * API key issuance and storage. Values are `pk_`, `sk_`, `pk_t_`, `sk_t_` plus 48 hex
 * characters; only their SHA-256 is stored, so a lookup is one indexed equality.
 * (Validation of grants per key kind lives with the scope rules.)
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
              allowed_file_types, project_ids, allowed_origins, rate_limit, expires_at)
            values (${id}, ${input.tenantId}, ${input.projectId}, ${input.kind}, ${input.name}, ${hashSecret(key)},
              ${key.slice(0, key.lastIndexOf('_') + 5)}, ${input.scopes}, ${input.allowedModels ?? null},
              ${input.allowedFileTypes ?? null}, ${input.projectIds ?? []}, ${input.allowedOrigins ?? null},
              ${input.rateLimit ?? null}, ${input.expiresAt ?? null})`;
  return { id, key };
}

export async function findKeyByValue(sql: Sql, value: string): Promise<StoredKey | null> {
  const [row] = await sql<StoredKey[]>`
    select id, tenant_id, project_id, kind, name, key_hint, scopes, allowed_models, allowed_file_types, project_ids,
           allowed_origins, rate_limit, expires_at, disabled_at, deleted_at
    from api_keys where key_hash = ${hashSecret(value)}`;
  return row ?? null;
}
