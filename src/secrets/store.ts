import type { Sql } from '../store/db.ts';
import { BadUserInput } from '../errors.ts';
import { newId } from '../ids.ts';
import { encrypt, LABEL_RE, MAX_SECRET_BYTES, openBox, type VaultKeys } from './vault.ts';

/**
 * Project secrets over GraphQL (`getSecret`, `putSecret`, `deleteSecret`): the same rows and
 * AES-256-GCM envelope as `svc secrets push` (owner kind `project`), and one `secret_audit` row
 * per read and write, written in the same statement or transaction as the access itself.
 * Values are returned to the caller only; nothing here logs them.
 */
export interface SecretActor {
  projectId: string;
  apiKeyId: string;
  customerId: string | null;
}

const OWNER = 'project';

export function checkLabel(label: unknown): string {
  if (typeof label !== 'string' || !LABEL_RE.test(label)) {
    throw new BadUserInput(
      'label must start with a letter and hold only letters, digits and _ (at most 128 characters)',
      { field: 'label' },
    );
  }
  return label;
}

export function checkValue(value: unknown): string {
  if (typeof value !== 'string') throw new BadUserInput('value must be a string', { field: 'value' });
  if (Buffer.byteLength(value) > MAX_SECRET_BYTES)
    throw new BadUserInput(`value is larger than ${MAX_SECRET_BYTES / 1024} KB`, { field: 'value' });
  if (value.includes('\0')) throw new BadUserInput('value must not contain NUL characters', { field: 'value' });
  return value;
}

const aadOf = (projectId: string, label: string) => `${projectId}/${OWNER}/${label}`;

interface Row {
  id: string;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
  key_id: string | null;
}

/** The plaintext of a secret, or null; audited (found or not) in the same statement. */
export async function readSecret(sql: Sql, vk: VaultKeys, who: SecretActor, label: string): Promise<string | null> {
  const [row] = await sql<Row[]>`
    with s as (
      select id, iv, ciphertext, tag, key_id from secrets
      where project_id = ${who.projectId} and owner_kind = ${OWNER} and label = ${label}
    ), a as (
      insert into secret_audit (project_id, label, action, api_key_id, customer_id, found)
      select ${who.projectId}, ${label}, 'read', ${who.apiKeyId}, ${who.customerId}, exists (select 1 from s)
    )
    select * from s`;
  if (!row) return null;
  const opened = openBox(vk, row, aadOf(who.projectId, label));
  if (opened.keyId !== vk.currentId) {
    // Sealed by a previous key: re-seal under the current one (rotation completes as rows are used).
    const box = encrypt(vk.current, opened.value, aadOf(who.projectId, label));
    await sql`update secrets set iv = ${box.iv}, ciphertext = ${box.ciphertext}, tag = ${box.tag}, key_id = ${vk.currentId}
              where id = ${row.id} and project_id = ${who.projectId} and key_id is not distinct from ${row.key_id}`;
  }
  return opened.value;
}

/** Creates or replaces a secret; answers whether it was created. Audited in the same transaction. */
export async function writeSecret(
  sql: Sql,
  vk: VaultKeys,
  who: SecretActor,
  label: string,
  value: string,
): Promise<{ created: boolean; updatedAt: Date }> {
  const box = encrypt(vk.current, value, aadOf(who.projectId, label));
  return sql.begin(async (tx) => {
    const [row] = await tx<{ created: boolean; updated_at: Date }[]>`
      insert into secrets (id, project_id, owner_kind, label, iv, ciphertext, tag, key_id)
      values (${newId('sec')}, ${who.projectId}, ${OWNER}, ${label}, ${box.iv}, ${box.ciphertext}, ${box.tag}, ${vk.currentId})
      on conflict (project_id, owner_kind, label) do update
        set iv = excluded.iv, ciphertext = excluded.ciphertext, tag = excluded.tag, key_id = excluded.key_id, updated_at = now()
      returning (xmax = 0) as created, updated_at`;
    await tx`insert into secret_audit (project_id, label, action, api_key_id, customer_id, found)
             values (${who.projectId}, ${label}, 'put', ${who.apiKeyId}, ${who.customerId}, ${!row!.created})`;
    return { created: row!.created, updatedAt: row!.updated_at };
  }) as Promise<{ created: boolean; updatedAt: Date }>;
}

/** Deletes a secret; answers whether there was one. Audited in the same statement. */
export async function removeSecret(sql: Sql, who: SecretActor, label: string): Promise<boolean> {
  const [row] = await sql<{ found: boolean }[]>`
    with d as (
      delete from secrets where project_id = ${who.projectId} and owner_kind = ${OWNER} and label = ${label} returning id
    ), a as (
      insert into secret_audit (project_id, label, action, api_key_id, customer_id, found)
      select ${who.projectId}, ${label}, 'delete', ${who.apiKeyId}, ${who.customerId}, exists (select 1 from d)
    )
    select exists (select 1 from d) as found`;
  return row!.found;
}

export interface AuditRow {
  label: string;
  action: 'read' | 'put' | 'delete';
  apiKeyId: string;
  customerId: string | null;
  found: boolean;
  at: Date;
}

/** The newest audit rows of a project (optionally of one label), newest first. */
export async function secretAudit(
  sql: Sql,
  projectId: string,
  label: string | null,
  first: number,
): Promise<AuditRow[]> {
  const rows = await sql<
    {
      label: string;
      action: AuditRow['action'];
      api_key_id: string;
      customer_id: string | null;
      found: boolean;
      at: Date;
    }[]
  >`
    select label, action, api_key_id, customer_id, found, at from secret_audit
    where project_id = ${projectId} ${label === null ? sql`` : sql`and label = ${label}`}
    order by id desc limit ${first}`;
  return rows.map((r) => ({
    label: r.label,
    action: r.action,
    apiKeyId: r.api_key_id,
    customerId: r.customer_id,
    found: r.found,
    at: r.at,
  }));
}
