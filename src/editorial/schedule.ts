import { randomBytes } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import { BadUserInput, Conflict, NotFound } from '../errors.ts';
import { auditStatement, auditOn, type AuditFrom, type AuditWho } from './audit.ts';
import type { Localised } from './restore.ts';
import { pgInstant } from '../store/instant.ts';

/**
 * Scheduled publishing (docs/scheduling.md): the actions waiting to fire, as rows of
 * scheduled_actions (sql/041_scheduled_actions.sql). The worker that fires them is
 * schedule-worker.ts; this file creates, lists and cancels them.
 */
export type ScheduledStatus = 'scheduled' | 'done' | 'cancelled' | 'failed';

export interface ScheduledActionView {
  id: string;
  action: string;
  modelKey: string | null;
  recordId: string | null;
  version: number | null;
  at: string;
  status: ScheduledStatus;
  error: string | null;
}

interface Row {
  id: string;
  action: string;
  model_key: string | null;
  record_id: string | null;
  version: number | null;
  at: Date;
  status: ScheduledStatus;
  error: string | null;
}

const view = (r: Row): ScheduledActionView => ({
  id: r.id,
  action: r.action,
  modelKey: r.model_key,
  recordId: r.record_id,
  version: r.version,
  at: r.at.toISOString(),
  status: r.status,
  error: r.error,
});

/** Actions waiting in one project, at most (a bound on what a project may queue). */
export const MAX_PENDING = 10_000;
/** How far ahead an action may be scheduled. */
export const MAX_AHEAD_MS = 10 * 366 * 24 * 3600_000;

export const newScheduledId = (): string => `sch_${randomBytes(12).toString('hex')}`;

/** `at` as a future instant: BAD_USER_INPUT for a time already past (or more than ten years ahead). */
export function checkAt(at: unknown, now = Date.now()): Date {
  const d = at instanceof Date ? at : typeof at === 'string' ? new Date(at) : null;
  if (!d || Number.isNaN(d.getTime())) throw new BadUserInput('at must be a date and time (ISO 8601)', { field: 'at' });
  if (d.getTime() <= now) throw new BadUserInput('at must be in the future', { field: 'at' });
  if (d.getTime() > now + MAX_AHEAD_MS) throw new BadUserInput('at must be within ten years', { field: 'at' });
  return d;
}

export interface NewAction {
  projectId: string;
  tenantId: string;
  action: 'publish' | 'unpublish';
  modelKey: string;
  recordId: string;
  version: number | null;
  /** The version's content (a publish of a given version), fixed now. */
  content: Localised | null;
  at: Date;
  createdBy: AuditWho;
}

/**
 * Stores one action, after checking the record is this model's in this project (NOT_FOUND
 * otherwise, another project's record included) and the project has room; audited in the same
 * transaction: nothing half-made on failure.
 */
export async function createScheduled(sql: Sql, a: NewAction, from: AuditFrom): Promise<ScheduledActionView> {
  const id = newScheduledId();
  const log = auditOn()
    ? auditStatement({ projectId: a.projectId, tenantId: a.tenantId }, a.createdBy, from, [
        { action: `schedule.${a.action}`, kind: 'record', id: a.recordId },
      ])
    : null;
  const rows = await sql.begin(async (tx) => {
    const [rec] = await tx<{ n: number }[]>`
      select (select count(*)::int from scheduled_actions where project_id = ${a.projectId} and status = 'scheduled') as n
      from records where id = ${a.recordId} and project_id = ${a.projectId} and model_key = ${a.modelKey}`;
    if (!rec) throw new NotFound(`No ${a.modelKey} record with _id "${a.recordId}"`);
    if (rec.n >= MAX_PENDING)
      throw new Conflict(`The project has ${MAX_PENDING} scheduled actions waiting: cancel some first`);
    const made = await tx<Row[]>`
      insert into scheduled_actions (id, project_id, action, model_key, record_id, version, content, at, created_by_kind, created_by)
      values (${id}, ${a.projectId}, ${a.action}, ${a.modelKey}, ${a.recordId}, ${a.version}, ${a.content === null ? null : tx.json(a.content as never)}, ${a.at}, ${a.createdBy.kind}, ${a.createdBy.id})
      returning id, action, model_key, record_id, version, at, status, error`;
    if (log) await tx.unsafe(log.text, log.params as never[]);
    return made;
  });
  return view(rows[0]!);
}

export async function listScheduled(
  sql: Sql,
  projectId: string,
  opts: { first: number; after: string | null; modelKey: string | null; modelKeys: readonly string[] | null },
): Promise<{
  items: (ScheduledActionView & { cursor: string })[];
  hasNextPage: boolean;
  endCursor: string | null;
  totalCount: number;
}> {
  const after = opts.after ? decodeCursor(opts.after) : null;
  const models = opts.modelKeys ? [...opts.modelKeys] : null;
  const rows = await sql<(Row & { total: number })[]>`
    select id, action, model_key, record_id, version, at, status, error, count(*) over ()::int as total from scheduled_actions
    where project_id = ${projectId}
      ${opts.modelKey ? sql`and model_key = ${opts.modelKey}` : sql``}
      ${models ? sql`and (model_key is null or model_key = any(${models}))` : sql``}
      ${after ? sql`and (at, id) > (${after.at}, ${after.id})` : sql``}
    order by at, id limit ${opts.first + 1}`;
  const page = rows.slice(0, opts.first);
  const last = page[page.length - 1];
  return {
    items: page.map((r) => ({ ...view(r), cursor: encodeCursor(r) })),
    hasNextPage: rows.length > opts.first,
    endCursor: last ? encodeCursor(last) : null,
    totalCount: rows[0]?.total ?? 0,
  };
}

const encodeCursor = (r: Row): string => Buffer.from(`${r.at.toISOString()}|${r.id}`).toString('base64url');

function decodeCursor(c: unknown): { at: Date; id: string } {
  const bad = () => new BadUserInput('after must be a cursor from a previous page (endCursor)', { field: 'after' });
  if (typeof c !== 'string' || c.length > 200) throw bad();
  const [at, id] = Buffer.from(c, 'base64url').toString('utf8').split('|');
  const d = pgInstant(at);
  if (!id || !/^sch_[0-9a-f]{24}$/.test(id) || !d) throw bad();
  return { at: d, id };
}

/**
 * Cancels a waiting action: NOT_FOUND for none in this project (or one of a model the caller
 * may not see), CONFLICT for one that already fired, failed or was cancelled. The update is
 * conditional on `scheduled`, so a cancel racing the worker's claim loses or wins cleanly.
 */
export async function cancelScheduled(
  sql: Sql,
  projectId: string,
  id: string,
  modelKeys: readonly string[] | null,
  audit: { tenantId: string; who: AuditWho; from: AuditFrom },
): Promise<ScheduledActionView> {
  if (typeof id !== 'string' || id.length > 100) throw new NotFound('No such scheduled action');
  return sql.begin(async (tx) => {
    const [cur] = await tx<
      Row[]
    >`select id, action, model_key, record_id, version, at, status, error from scheduled_actions where id = ${id} and project_id = ${projectId} for update`;
    if (!cur || (modelKeys && cur.model_key && !modelKeys.includes(cur.model_key)))
      throw new NotFound(`No scheduled action "${id}"`);
    if (cur.status !== 'scheduled')
      throw new Conflict(`Scheduled action "${id}" is ${cur.status}: only a waiting action can be cancelled`);
    const [row] = await tx<Row[]>`
      update scheduled_actions set status = 'cancelled', updated_at = now() where id = ${id}
      returning id, action, model_key, record_id, version, at, status, error`;
    if (auditOn()) {
      const st = auditStatement({ projectId, tenantId: audit.tenantId }, audit.who, audit.from, [
        { action: 'schedule.cancel', kind: 'scheduledAction', id },
      ]);
      await tx.unsafe(st.text, st.params as never[]);
    }
    return view(row!);
  }) as Promise<ScheduledActionView>;
}
