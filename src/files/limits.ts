import type { Sql } from '../store/db.ts';
import { PayloadTooLarge } from '../errors.ts';

/**
 * A project's file limits: the process defaults (SVC_FILES_MAX_BYTES, SVC_FILES_QUOTA_BYTES,
 * SVC_FILES_RETENTION_DAYS) unless the project's settings say otherwise
 * (`settings.files.maxFileBytes`, `quotaBytes`, `retentionDays`; a project can lower the
 * largest file, never raise it above the process's). `used` counts every stored file of the
 * project, soft-deleted ones included (their bytes are kept until the retention sweep).
 */
export interface Limits {
  maxBytes: number;
  quotaBytes: number;
  retentionDays: number;
  used: number;
}

export interface LimitDefaults {
  maxBytes: number;
  quotaBytes: number;
  retentionDays: number;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null);

export async function projectLimits(sql: Sql, projectId: string, d: LimitDefaults): Promise<Limits> {
  const [row] = await sql<{ files: Record<string, unknown> | null; used: string }[]>`
    select p.settings->'files' as files, (select coalesce(sum(size), 0) from files where project_id = ${projectId})::text as used
    from projects p where p.id = ${projectId}`;
  const s = row?.files && typeof row.files === 'object' ? row.files : {};
  return {
    maxBytes: Math.min(d.maxBytes, num(s.maxFileBytes) ?? d.maxBytes),
    quotaBytes: num(s.quotaBytes) ?? d.quotaBytes,
    retentionDays: num(s.retentionDays) ?? d.retentionDays,
    used: Number(row?.used ?? 0),
  };
}

/** The most bytes the next file may have: the file limit, and what is left of the quota. */
export function room(l: Limits): number {
  return Math.max(0, Math.min(l.maxBytes, l.quotaBytes - l.used));
}

/** The refusal of `size` bytes (or of a stream past `room`): over the file limit or the quota. */
export function tooLarge(l: Limits, size: number | null): PayloadTooLarge {
  if (size === null ? room(l) >= l.maxBytes : size > l.maxBytes)
    return new PayloadTooLarge(`The file exceeds ${l.maxBytes} bytes`, { limit: l.maxBytes });
  return new PayloadTooLarge(`The project's file storage is full: ${l.used} of ${l.quotaBytes} bytes used`, {
    quota: l.quotaBytes,
    used: l.used,
  });
}
