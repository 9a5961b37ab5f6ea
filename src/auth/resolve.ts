import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import { BadUserInput, PermissionDenied, Unauthenticated } from '../errors.ts';
import { findKeyByValue, kindOfKey, type StoredKey } from './keys.ts';
import { isPublicKey, isTenantKey, type KeyPrincipal } from './principal.ts';

/**
 * Resolves `x-api-key` (and `X-Project-Id` for tenant keys) into a KeyPrincipal.
 * Spec errors: missing/invalid/disabled/expired/deleted → UNAUTHENTICATED
 * "Authentication required"; tenant key without X-Project-Id → 400; not on its list → 403.
 */
export const AUTH_REQUIRED = 'Authentication required';

export function fingerprintOf(k: Pick<KeyPrincipal, 'kind' | 'scopes' | 'allowedModels'>): string {
  const h = createHash('sha256');
  h.update(isPublicKey(k.kind) ? 'public' : 'secret');
  h.update('\0' + [...k.scopes].sort().join(','));
  h.update('\0' + (k.allowedModels ? [...k.allowedModels].sort().join(',') : '*'));
  return h.digest('hex').slice(0, 24);
}

export function principalFromRow(row: StoredKey, projectHeader: string | null | undefined): KeyPrincipal {
  const now = Date.now();
  if (row.disabled_at || row.deleted_at || (row.expires_at && row.expires_at.getTime() <= now)) {
    throw new Unauthenticated(AUTH_REQUIRED);
  }
  let projectId: string;
  if (isTenantKey(row.kind)) {
    if (!projectHeader) throw new BadUserInput('X-Project-Id is required for a tenant API key');
    if (!row.project_ids.includes(projectHeader)) throw new PermissionDenied("X-Project-Id is not on the key's project allow-list");
    projectId = projectHeader;
  } else {
    projectId = row.project_id!;
  }
  const base = { kind: row.kind, scopes: new Set(row.scopes), allowedModels: row.allowed_models };
  return {
    keyId: row.id,
    tenantId: row.tenant_id,
    projectId,
    allowedFileTypes: row.allowed_file_types,
    ...base,
    fingerprint: fingerprintOf(base),
  };
}

export async function resolveKey(sql: Sql, apiKey: string | null | undefined, projectHeader: string | null | undefined): Promise<KeyPrincipal> {
  if (!apiKey || !kindOfKey(apiKey)) throw new Unauthenticated(AUTH_REQUIRED);
  const row = await findKeyByValue(sql, apiKey);
  if (!row) throw new Unauthenticated(AUTH_REQUIRED);
  return principalFromRow(row, projectHeader);
}
