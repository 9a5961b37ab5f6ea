import type { Sql } from '../store/db.ts';
import { NotFound } from '../errors.ts';
import type { FileStorage } from './storage.ts';
import type { FileRow } from './store.ts';

/**
 * Soft delete, restore and permanent delete (files:delete). A soft-deleted file is hidden from
 * `files`, its URL answers 404, its bytes stay. Permanent delete removes the row, and the bytes
 * once no other row (of any project, soft-deleted ones included) names the same SHA-256; the
 * check and the removal hold a transaction-scoped advisory lock on the hash, which an upload of
 * the same bytes takes too, so an upload racing the delete never loses its blob.
 */
/** `customerId`: a customer acts on their own uploads only (others' are NOT_FOUND); null for keys. */
export async function softDeleteFile(
  sql: Sql,
  projectId: string,
  id: string,
  customerId: string | null = null,
): Promise<FileRow> {
  const [row] = await sql<
    FileRow[]
  >`update files set deleted_at = coalesce(deleted_at, now()) where id = ${id} and project_id = ${projectId} ${ownerIs(sql, customerId)} returning *`;
  if (!row) throw new NotFound(`File ${id} not found`);
  return row;
}

export async function restoreFile(
  sql: Sql,
  projectId: string,
  id: string,
  customerId: string | null = null,
): Promise<FileRow> {
  const [row] = await sql<
    FileRow[]
  >`update files set deleted_at = null where id = ${id} and project_id = ${projectId} ${ownerIs(sql, customerId)} returning *`;
  if (!row) throw new NotFound(`File ${id} not found`);
  return row;
}

/** The lock key of a hash (both the upload and the permanent delete take it). */
export function hashLock(sha256: string): bigint {
  return BigInt.asIntN(64, BigInt(`0x${sha256.slice(0, 16)}`));
}

function ownerIs(sql: Sql, customerId: string | null) {
  return customerId === null ? sql`` : sql`and customer_id = ${customerId}`;
}

export async function permanentlyDeleteFile(
  sql: Sql,
  storage: FileStorage,
  projectId: string,
  id: string,
  customerId: string | null = null,
  onlyDeleted = false,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    const [row] = await tx<
      FileRow[]
    >`select * from files where id = ${id} and project_id = ${projectId} ${ownerIs(t, customerId)} ${onlyDeleted ? t`and deleted_at is not null` : t``} for update`;
    if (!row) throw new NotFound(`File ${id} not found`);
    await tx`select pg_advisory_xact_lock(${hashLock(row.sha256).toString()}::bigint)`;
    await tx`delete from files where id = ${id}`;
    const [other] = await tx`select 1 from files where sha256 = ${row.sha256} limit 1`;
    if (!other) await storage.remove(row.sha256);
    return true;
  }) as Promise<boolean>;
}

/**
 * Removes the blob of a hash unless a row names it, under the hash's lock: an upload whose
 * bytes were committed but whose row was not written leaves nothing on disk.
 */
export async function removeUnnamedBlob(sql: Sql, storage: FileStorage, sha256: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${hashLock(sha256).toString()}::bigint)`;
    const [other] = await tx`select 1 from files where sha256 = ${sha256} limit 1`;
    if (!other) await storage.remove(sha256);
  });
}

/**
 * The retention sweep: files soft-deleted longer ago than their project's retention
 * (settings.files.retentionDays, else the default) are deleted for good, a batch at a time;
 * SKIP LOCKED lets several worker processes sweep side by side.
 */
export async function sweepDeleted(
  sql: Sql,
  storage: FileStorage,
  defaultDays: number,
  deleted?: (f: { id: string; project_id: string }) => Promise<void>,
): Promise<number> {
  const due = await sql<{ id: string; project_id: string }[]>`
    select f.id, f.project_id from files f join projects p on p.id = f.project_id
    where f.deleted_at is not null
      and f.deleted_at < now() - make_interval(days => coalesce(case when jsonb_typeof(p.settings->'files'->'retentionDays') = 'number' then (p.settings->'files'->>'retentionDays')::int end, ${defaultDays}::int))
    order by f.deleted_at limit 200`;
  let n = 0;
  for (const f of due) {
    try {
      if (await permanentlyDeleteFile(sql, storage, f.project_id, f.id, null, true)) {
        n++;
        await deleted?.(f);
      }
    } catch {
      // Restored or deleted meanwhile: nothing to do.
    }
  }
  return n;
}
