import { randomUUID } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { Statement } from '../content/tx.ts';
import { BadUserInput } from '../errors.ts';
import { pgInstant } from '../store/instant.ts';

/**
 * The audit log (docs/audit.md): who changed what, when, from where. Entries are written in the
 * transaction of the change where there is one (`auditStatement` is one more statement of a
 * pipelined write transaction: no round trip of its own), else right after it (control-plane
 * routes). Values are never recorded, only what was changed: a secret's label, never its value.
 */
export type ActorKind = 'member' | 'apiKey' | 'customer' | 'root';

export interface AuditWho {
  kind: ActorKind;
  id: string | null;
}

/** Where a change came from: the request's id, the client's address and user agent. */
export interface AuditFrom {
  requestId: string | null;
  ip: string | null;
  userAgent: string | null;
}

export interface AuditTarget {
  action: string;
  kind: string;
  id: string | null;
}

export interface AuditEntryView {
  id: string;
  at: string;
  actor: AuditWho;
  action: string;
  target: { kind: string; id: string | null };
  projectId: string | null;
  requestId: string | null;
  ip: string | null;
  userAgent: string | null;
}

/** `SVC_AUDIT=off` turns the log off for the process (only to measure its cost: bench write). */
export const auditOn = (): boolean => process.env.SVC_AUDIT !== 'off';

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;
// Stored values are bounded and hold no control characters (PostgreSQL text refuses NUL).
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this removes
const CONTROL = /[\u0000-\u001f\u007f]/g;
const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this detects
const ODD = /[\u0000-\u001f\u007f\uD800-\uDFFF]/;

function clip(v: string | null | undefined, max: number): string | null {
  if (v === null || v === undefined || v === '') return null;
  // Lone surrogates become U+FFFD (PostgreSQL stores UTF-8 only). The usual value (an id, a
  // user agent) has neither, and is returned after one test.
  const s = ODD.test(v) ? v.replace(CONTROL, '').replace(LONE, '\uFFFD') : v;
  return s.length > max ? s.slice(0, max) : s;
}

/** The request's origin as the log keeps it: the caller's `x-request-id` when well formed, else a new one. */
export function auditFrom(
  headers: { get(name: string): string | null } | Record<string, string | undefined>,
  ip: string | null,
): AuditFrom {
  const get = (n: string): string | null =>
    typeof (headers as Headers).get === 'function'
      ? (headers as Headers).get(n)
      : ((headers as Record<string, string | undefined>)[n] ?? null);
  const given = get('x-request-id');
  return {
    requestId: given !== null && REQUEST_ID.test(given) ? given : randomUUID(),
    ip: clip(ip, 64),
    userAgent: clip(get('user-agent'), 512),
  };
}

/** The kind of an id written as a record's writer (`mem_`, `cus_`, else an API key). */
export function whoById(id: string | null): AuditWho {
  if (id?.startsWith('mem_')) return { kind: 'member', id };
  if (id?.startsWith('cus_')) return { kind: 'customer', id };
  return { kind: 'apiKey', id };
}

export const NO_ORIGIN: AuditFrom = { requestId: null, ip: null, userAgent: null };

/**
 * One INSERT of the entries of one change (one row each), for a write transaction
 * (`WriteTx.follow`); parameters only, no value of the change.
 */
export function auditStatement(
  scope: { projectId: string | null; tenantId: string | null },
  who: AuditWho,
  from: AuditFrom,
  targets: readonly AuditTarget[],
): Statement {
  if (targets.length === 1) {
    const t = targets[0]!;
    return {
      text: `insert into audit_log (project_id, tenant_id, actor_kind, actor_id, action, target_kind, target_id, request_id, ip, user_agent)
        values ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text, $10::text)`,
      prepared: true,
      params: [
        scope.projectId,
        scope.tenantId,
        who.kind,
        clip(who.id, 200),
        clip(t.action, 100),
        clip(t.kind, 50),
        clip(t.id, 500),
        from.requestId,
        from.ip,
        from.userAgent,
      ],
    };
  }
  return {
    text: `insert into audit_log (project_id, tenant_id, actor_kind, actor_id, action, target_kind, target_id, request_id, ip, user_agent)
      select $1::text, $2::text, $3::text, $4::text, a, k, i, $8::text, $9::text, $10::text from unnest($5::text[], $6::text[], $7::text[]) as x(a, k, i)`,
    params: [
      scope.projectId,
      scope.tenantId,
      who.kind,
      clip(who.id, 200),
      targets.map((t) => clip(t.action, 100)),
      targets.map((t) => clip(t.kind, 50)),
      targets.map((t) => clip(t.id, 500)),
      from.requestId,
      from.ip,
      from.userAgent,
    ],
  };
}

/** Writes entries on their own (changes without a transaction of ours to join). */
export async function recordAudit(
  sql: Sql,
  scope: { projectId: string | null; tenantId: string | null },
  who: AuditWho,
  from: AuditFrom,
  targets: readonly AuditTarget[],
): Promise<void> {
  if (!auditOn() || targets.length === 0) return;
  const st = auditStatement(scope, who, from, targets);
  await sql.unsafe(st.text, st.params as never[]);
}

export interface AuditQuery {
  projectIds: readonly string[] | null;
  tenantId: string | null;
  since: Date | null;
  actor: string | null;
  first: number;
  after: string | null;
}

export const MAX_PAGE = 500;

export function parseAuditQuery(q: Record<string, string | undefined>): {
  projectId: string | null;
  since: Date | null;
  actor: string | null;
  first: number;
  after: string | null;
} {
  const since = q.since ? pgInstant(q.since) : null;
  if (q.since && !since) throw new BadUserInput('since must be an ISO 8601 date and time', { field: 'since' });
  const first = q.first === undefined || q.first === '' ? 100 : Number(q.first);
  if (!Number.isSafeInteger(first) || first < 1 || first > MAX_PAGE)
    throw new BadUserInput(`first must be a whole number from 1 to ${MAX_PAGE}`, { field: 'first' });
  const after = q.after ? q.after : null;
  if (after !== null && !/^[0-9]{1,19}$/.test(after))
    throw new BadUserInput('after must be a cursor from a previous page (endCursor)', { field: 'after' });
  const actor = q.actor ? clip(q.actor, 200) : null;
  const projectId = q.projectId ? clip(q.projectId, 200) : null;
  return { projectId, since, actor, first, after };
}

/** Newest first; `after` is the id of the last entry of the previous page. */
export async function listAudit(
  sql: Sql,
  q: AuditQuery,
): Promise<{ entries: AuditEntryView[]; endCursor: string | null; hasNextPage: boolean }> {
  const rows = await sql<
    {
      id: string;
      at: Date;
      actor_kind: ActorKind;
      actor_id: string | null;
      action: string;
      target_kind: string;
      target_id: string | null;
      project_id: string | null;
      request_id: string | null;
      ip: string | null;
      user_agent: string | null;
    }[]
  >`
    select id::text, at, actor_kind, actor_id, action, target_kind, target_id, project_id, request_id, ip, user_agent from audit_log
    where ${q.projectIds ? sql`project_id = any(${q.projectIds as string[]})` : sql`tenant_id = ${q.tenantId}`}
      ${q.since ? sql`and at >= ${q.since}` : sql``}
      ${q.actor ? sql`and actor_id = ${q.actor}` : sql``}
      ${q.after ? sql`and id < ${q.after}::bigint` : sql``}
    order by id desc limit ${q.first + 1}`;
  const page = rows.slice(0, q.first);
  return {
    entries: page.map((r) => ({
      id: r.id,
      at: r.at.toISOString(),
      actor: { kind: r.actor_kind, id: r.actor_id },
      action: r.action,
      target: { kind: r.target_kind, id: r.target_id },
      projectId: r.project_id,
      requestId: r.request_id,
      ip: r.ip,
      userAgent: r.user_agent,
    })),
    endCursor: page.length ? page[page.length - 1]!.id : null,
    hasNextPage: rows.length > q.first,
  };
}

export const DEFAULT_RETENTION_DAYS = 90;

/**
 * Removes entries older than their project's retention (`project.settings.auditRetentionDays`,
 * default 90 days; entries of no project, or of a deleted one, keep the default). At most
 * `limit` rows per call, so a purge never holds a long transaction; answers how many went.
 */
export async function purgeAudit(sql: Sql, limit = 5000): Promise<number> {
  // Rows older than a day at least (the shortest retention) first: the BRIN index on `at`
  // narrows the scan; then each row's own project's retention. Deleted by ctid (no primary key).
  const rows = await sql<{ n: number }[]>`
    with doomed as (
      select a.ctid as t from audit_log a left join projects p on p.id = a.project_id
      where a.at < now() - interval '1 day' and a.at < now() - make_interval(days => coalesce(
        case when jsonb_typeof(p.settings->'auditRetentionDays') = 'number' then (p.settings->>'auditRetentionDays')::numeric::int end,
        ${DEFAULT_RETENTION_DAYS}))
      limit ${limit}
    ), gone as (delete from audit_log where ctid = any(array(select t from doomed)) returning 1)
    select count(*)::int as n from gone`;
  return rows[0]?.n ?? 0;
}
