import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Settings } from '../env.ts';
import type { Sql } from '../store/db.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { BadUserInput, PermissionDenied } from '../errors.ts';
import { keyIdOf, secretsKey, secretsKeyring } from '../secrets-key.ts';
import { newId } from '../ids.ts';

/**
 * Project secrets, AES-256-GCM at rest. The key comes from `SVC_SECRETS_KEY` (any string;
 * hashed to 32 bytes) or from `SVC_DATA_DIR/secrets-key`, generated once with mode 0600.
 * Values never leave this module except decrypted for comparison.
 */
/**
 * The deployment's vault keys: the current one encrypts; previous ones only decrypt, so the key
 * can be rotated (docs/secrets.md): set the new `SVC_SECRETS_KEY`, list the old value(s) in
 * `SVC_SECRETS_KEY_PREVIOUS` (comma-separated); a generated `SVC_DATA_DIR/secrets-key` left
 * behind by a move to `SVC_SECRETS_KEY` counts as a previous key. Rows are re-encrypted under
 * the current key when they are read or written.
 */
export interface VaultKeys {
  current: Buffer;
  currentId: string;
  /** Every key that may decrypt, by id (the current one included). */
  byId: ReadonlyMap<string, Buffer>;
}

export function vaultKeys(dataDir: string): VaultKeys {
  const { current, previous } = secretsKeyring(dataDir);
  const byId = new Map<string, Buffer>([[keyIdOf(current), current]]);
  for (const k of previous) byId.set(keyIdOf(k), k);
  return { current, currentId: keyIdOf(current), byId };
}

/**
 * Decrypts a stored box with the key that sealed it (its `key_id`), or, for rows written
 * before key ids were kept, with whichever key opens it. Returns the key id that did.
 */
export function openBox(
  vk: VaultKeys,
  row: { iv: Buffer; ciphertext: Buffer; tag: Buffer; key_id: string | null },
  aad: string,
): { value: string; keyId: string } {
  const named = row.key_id ? vk.byId.get(row.key_id) : undefined;
  if (named) return { value: decrypt(named, row, aad), keyId: row.key_id! };
  for (const [id, k] of vk.byId) {
    try {
      return { value: decrypt(k, row, aad), keyId: id };
    } catch {
      // not this key
    }
  }
  throw new Error('no vault key opens this secret (was SVC_SECRETS_KEY changed without SVC_SECRETS_KEY_PREVIOUS?)');
}

export function encrypt(key: Buffer, plaintext: string, aad: string): { iv: Buffer; ciphertext: Buffer; tag: Buffer } {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  // Binding the row identity stops a ciphertext being swapped onto another label.
  c.setAAD(Buffer.from(aad));
  const ciphertext = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return { iv, ciphertext, tag: c.getAuthTag() };
}

export function decrypt(key: Buffer, box: { iv: Buffer; ciphertext: Buffer; tag: Buffer }, aad: string): string {
  const d = createDecipheriv('aes-256-gcm', key, box.iv);
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(box.tag);
  return Buffer.concat([d.update(box.ciphertext), d.final()]).toString('utf8');
}

export const LABEL_RE = /^[A-Za-z][A-Za-z0-9_]{0,127}$/;
/** The largest secret value (UTF-8 bytes): API keys, certificates and service-account JSON fit. */
export const MAX_SECRET_BYTES = 64 * 1024;
const OWNER_RE = /^[a-z][a-z0-9_]{0,63}$/;

/** `svc secrets push`: creates or updates the given secrets; reports labels only. */
export async function pushSecrets(
  svc: { sql: Sql; settings: Pick<Settings, 'production' | 'dataDir'> },
  caller: ControlCaller,
  projectId: string,
  input: unknown,
): Promise<{ created: string[]; updated: string[]; unchanged: string[] }> {
  if (svc.settings.production)
    throw new PermissionDenied(
      'svc secrets push is refused in production (SVC_ENV=production): set production secrets in the admin UI',
    );
  const project = await projectOfCaller(svc.sql, caller, projectId);
  if (!memberMay(caller, 'keys:write', project.id))
    throw new PermissionDenied('Pushing secrets needs an owner or admin control key');
  const list = (input as { secrets?: unknown })?.secrets;
  if (!Array.isArray(list)) throw new BadUserInput('secrets must be a list of { ownerKind, label, value }');
  const seen = new Set<string>();
  for (const [i, s] of list.entries()) {
    const e = s as { ownerKind?: unknown; label?: unknown; value?: unknown };
    if (typeof e.ownerKind !== 'string' || !OWNER_RE.test(e.ownerKind))
      throw new BadUserInput(`secrets[${i}].ownerKind must be a lowercase word such as project`);
    if (typeof e.label !== 'string' || !LABEL_RE.test(e.label))
      throw new BadUserInput(`secrets[${i}].label must start with a letter and hold letters, digits and _`);
    if (typeof e.value !== 'string') throw new BadUserInput(`secrets[${i}] (${e.label}) has no value`);
    if (Buffer.byteLength(e.value) > MAX_SECRET_BYTES)
      throw new BadUserInput(`secrets[${i}] (${e.label}) is larger than ${MAX_SECRET_BYTES / 1024} KB`);
    if (seen.has(`${e.ownerKind}/${e.label}`)) throw new BadUserInput(`secrets[${i}]: duplicate label ${e.label}`);
    seen.add(`${e.ownerKind}/${e.label}`);
  }
  const vk = vaultKeys(svc.settings.dataDir);
  const key = vk.current;
  const out = { created: [] as string[], updated: [] as string[], unchanged: [] as string[] };
  await svc.sql.begin(async (tx) => {
    for (const s of list as { ownerKind: string; label: string; value: string }[]) {
      const aad = `${project.id}/${s.ownerKind}/${s.label}`;
      const [row] = await tx<{ id: string; iv: Buffer; ciphertext: Buffer; tag: Buffer; key_id: string | null }[]>`
        select id, iv, ciphertext, tag, key_id from secrets where project_id = ${project.id} and owner_kind = ${s.ownerKind} and label = ${s.label}`;
      if (row) {
        let same = false;
        try {
          const opened = openBox(vk, row, aad);
          // Unchanged, but still sealed by a previous key: re-encrypted below (rotation).
          same = opened.value === s.value && opened.keyId === vk.currentId;
        } catch {
          same = false; // encrypted under a key we no longer have: overwrite
        }
        if (same) {
          out.unchanged.push(s.label);
          continue;
        }
        const box = encrypt(key, s.value, aad);
        await tx`update secrets set iv = ${box.iv}, ciphertext = ${box.ciphertext}, tag = ${box.tag}, key_id = ${vk.currentId}, updated_at = now()
                 where id = ${row.id} and project_id = ${project.id}`;
        out.updated.push(s.label);
      } else {
        const box = encrypt(key, s.value, aad);
        await tx`insert into secrets (id, project_id, owner_kind, label, iv, ciphertext, tag, key_id)
                 values (${newId('sec')}, ${project.id}, ${s.ownerKind}, ${s.label}, ${box.iv}, ${box.ciphertext}, ${box.tag}, ${vk.currentId})`;
        out.created.push(s.label);
      }
    }
  });
  return out;
}

/** A project secret's plaintext for the server's own use (an upstream client secret); null when unset. */
export async function readSecret(
  sql: Sql,
  dataDir: string,
  projectId: string,
  label: string,
  ownerKind = 'project',
): Promise<string | null> {
  const [row] = await sql<{ iv: Buffer; ciphertext: Buffer; tag: Buffer }[]>`
    select iv, ciphertext, tag from secrets where project_id = ${projectId} and owner_kind = ${ownerKind} and label = ${label}`;
  if (!row) return null;
  try {
    return decrypt(secretsKey(dataDir), row, `${projectId}/${ownerKind}/${label}`);
  } catch {
    return null; // encrypted under another key
  }
}
