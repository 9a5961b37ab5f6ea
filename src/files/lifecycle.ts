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
export async function softDeleteFile(sql: Sql, projectId: string, id: string): Promise<FileRow> {
  const [row] = await sql<FileRow[]>`update files set deleted_at = coalesce(deleted_at, now()) where id = ${id} and project_id = ${projectId} returning *`;
  if (!row) throw new NotFound(`File ${id} not found`);
  return row;
}

export async function restoreFile(sql: Sql, projectId: string, id: string): Promise<FileRow> {
  const [row] = await sql<FileRow[]>`update files set deleted_at = null where id = ${id} and project_id = ${projectId} returning *`;
  if (!row) throw new NotFound(`File ${id} not found`);
  return row;
}

/** The lock key of a hash (both the upload and the permanent delete take it). */
export function hashLock(sha256: string): bigint {
  return BigInt.asIntN(64, BigInt(`0x${sha256.slice(0, 16)}`));
}

export async function permanentlyDeleteFile(sql: Sql, storage: FileStorage, projectId: string, id: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const [row] = await tx<FileRow[]>`select * from files where id = ${id} and project_id = ${projectId}`;
    if (!row) throw new NotFound(`File ${id} not found`);
    await tx`select pg_advisory_xact_lock(${hashLock(row.sha256).toString()}::bigint)`;
    await tx`delete from files where id = ${id}`;
    const [other] = await tx`select 1 from files where sha256 = ${row.sha256} limit 1`;
    if (!other) await storage.remove(row.sha256);
    return true;
  }) as Promise<boolean>;
}
