import type { Sql } from '../store/db.ts';
import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, Conflict, NotFound } from '../errors.ts';
import { newId } from '../ids.ts';
import { isVersioned } from '../content/write.ts';
import { pgInstant } from '../store/instant.ts';

/**
 * Releases (issue 30, item 3): a named set of record versions across models that goes live in
 * one transaction (publish.ts), on demand or at a set time (schedule.ts). This file keeps the
 * set: create, add, remove, schedule, discard, read. Every change locks the release row first,
 * so it never interleaves with a publish of the same release in another process.
 */
export type ReleaseStatus = 'open' | 'scheduled' | 'published' | 'discarded';

export interface ReleaseItem {
  modelKey: string;
  recordId: string;
  /** Null: the record's working version as it stands when the release goes live. */
  version: number | null;
}

export interface ReleaseView {
  id: string;
  name: string;
  status: ReleaseStatus;
  at: Date | null;
  error: string | null;
  createdAt: Date;
  updatedAt: Date;
  items: ReleaseItem[];
}

/** Bounds: a release is one transaction, so its size is bounded like any other write. */
export const RELEASE_LIMITS = { nameChars: 200, items: 500, maxVersion: 1_000_000, maxScheduleDays: 366 * 5 } as const;

const RELEASE_ID = /^rel_[0-9a-f]{24}$/;
const RECORD_ID = /^[A-Za-z0-9_-]{1,100}$/;

interface ReleaseRow {
  id: string;
  name: string;
  status: ReleaseStatus;
  at: Date | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A text the database can hold and a person can read: no NUL, no lone surrogates, bounded. */
export function checkName(name: unknown): string {
  if (typeof name !== 'string') throw new BadUserInput('name must be a string', { field: 'name' });
  const n = name.trim();
  if (n.length === 0 || n.length > RELEASE_LIMITS.nameChars)
    throw new BadUserInput(`name must be 1 to ${RELEASE_LIMITS.nameChars} characters`, { field: 'name' });
  if (n.includes('\0')) throw new BadUserInput('name must not contain NUL characters', { field: 'name' });
  if (!(n as unknown as { isWellFormed(): boolean }).isWellFormed())
    throw new BadUserInput('name must not contain unpaired UTF-16 surrogates', { field: 'name' });
  return n;
}

/** An id that cannot be a release is unknown, without asking the database. */
function checkReleaseId(id: unknown): string {
  const s = typeof id === 'string' ? id : '';
  if (!RELEASE_ID.test(s)) throw unknownRelease(s);
  return s;
}

const unknownRelease = (id: string) => new NotFound(`No release with id "${id.slice(0, 40)}"`);

function view(r: ReleaseRow, items: ReleaseItem[]): ReleaseView {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    at: r.at,
    error: r.error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    items,
  };
}

async function itemsOf(sql: Sql, ids: readonly string[]): Promise<Map<string, ReleaseItem[]>> {
  const out = new Map<string, ReleaseItem[]>(ids.map((id) => [id, []]));
  if (ids.length === 0) return out;
  const rows = await sql<{ release_id: string; model_key: string; record_id: string; version: number | null }[]>`
    select release_id, model_key, record_id, version from release_items where release_id = any(${ids as string[]}) order by release_id, added_at, record_id`;
  for (const r of rows)
    out.get(r.release_id)!.push({ modelKey: r.model_key, recordId: r.record_id, version: r.version });
  return out;
}

export async function createRelease(
  sql: Sql,
  projectId: string,
  name: unknown,
  userId: string | null,
): Promise<ReleaseView> {
  const n = checkName(name);
  const [row] = await sql<ReleaseRow[]>`
    insert into releases (id, project_id, name, created_by) values (${newId('rel')}, ${projectId}, ${n}, ${userId}) returning *`;
  return view(row!, []);
}

export async function getRelease(sql: Sql, projectId: string, id: string): Promise<ReleaseView | null> {
  if (!RELEASE_ID.test(id)) return null;
  const [row] = await sql<ReleaseRow[]>`select * from releases where id = ${id} and project_id = ${projectId}`;
  if (!row) return null;
  return view(row, (await itemsOf(sql, [row.id])).get(row.id)!);
}

/** Whether a release of this project exists (reads with `release:` check it first). */
export async function releaseExists(sql: Sql, projectId: string, id: unknown): Promise<string> {
  const rid = checkReleaseId(id);
  const [row] = await sql<{ id: string }[]>`select id from releases where id = ${rid} and project_id = ${projectId}`;
  if (!row) throw unknownRelease(rid);
  return rid;
}

/** Newest first; the cursor is the last row's (created_at, id). */
export async function listReleases(
  sql: Sql,
  projectId: string,
  first: number,
  after: string | null,
): Promise<{ releases: ReleaseView[]; hasNextPage: boolean; endCursor: string | null }> {
  let cur: [string, string] | null = null;
  if (after) {
    try {
      const v = JSON.parse(Buffer.from(after, 'base64url').toString('utf8'));
      if (
        Array.isArray(v) &&
        v.length === 2 &&
        typeof v[0] === 'string' &&
        pgInstant(v[0]) !== null &&
        typeof v[1] === 'string' &&
        RELEASE_ID.test(v[1])
      )
        cur = [v[0], v[1]];
    } catch {}
    if (!cur) throw new BadUserInput('Invalid cursor', { field: 'after' });
  }
  const rows = await sql<ReleaseRow[]>`
    select * from releases where project_id = ${projectId}
      ${cur ? sql`and (created_at, id) < (${cur[0]}::timestamptz, ${cur[1]})` : sql``}
    order by created_at desc, id desc limit ${first + 1}`;
  const hasNextPage = rows.length > first;
  if (hasNextPage) rows.pop();
  const items = await itemsOf(
    sql,
    rows.map((r) => r.id),
  );
  const last = rows.at(-1);
  return {
    releases: rows.map((r) => view(r, items.get(r.id)!)),
    hasNextPage,
    endCursor: last
      ? Buffer.from(JSON.stringify([last.created_at.toISOString(), last.id])).toString('base64url')
      : null,
  };
}

/** Locks the release for a change; it must be this project's and still open or scheduled. */
async function lockChangeable(tx: Sql, projectId: string, id: unknown, what: string): Promise<ReleaseRow> {
  const rid = checkReleaseId(id);
  const [row] = await tx<
    ReleaseRow[]
  >`select * from releases where id = ${rid} and project_id = ${projectId} for update`;
  if (!row) throw unknownRelease(rid);
  if (row.status === 'published' || row.status === 'discarded')
    throw new Conflict(`Release "${rid}" is ${row.status}: cannot ${what}`);
  return row;
}

interface VersionEntry {
  action: string;
  locale: string | null;
  data: Record<string, unknown> | null;
  variant_id: string | null;
}

/**
 * The record's working content in every locale right after history entry `version` (1-based,
 * as `recordVersions` numbers them): a create sets its locale's content, an update of the
 * default content merges its fields over that locale's content (or, for a locale it did not
 * have yet, over the default locale's), as the write did. Variant writes and (un)publishes do
 * not change the default content.
 */
export function contentAt(
  entries: readonly VersionEntry[],
  defaultLocale: string,
): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const e of entries) {
    if (!e.data || !e.locale || (e.variant_id !== null && e.variant_id !== 'default')) continue;
    if (e.action === 'created') out[e.locale] = { ...e.data };
    else if (e.action === 'updated' || e.action === 'restored')
      out[e.locale] = { ...(out[e.locale] ?? out[defaultLocale] ?? {}), ...e.data };
  }
  return out;
}

export interface AddInput {
  releaseId: unknown;
  model: ModelDef | undefined;
  modelKey: string;
  recordId: unknown;
  version: unknown;
}

export async function addToRelease(
  sql: Sql,
  projectId: string,
  defaultLocale: string,
  input: AddInput,
): Promise<ReleaseView> {
  const { model } = input;
  if (!model) throw new BadUserInput(`Unknown model "${String(input.modelKey).slice(0, 60)}"`, { field: 'modelKey' });
  if (!isVersioned(model))
    throw new BadUserInput(`Model "${model.key}" is not versioned: its records are live as soon as they are written`, {
      field: 'modelKey',
    });
  const recordId = typeof input.recordId === 'string' ? input.recordId : '';
  const noRecord = new NotFound(`No ${model.key} record with _id "${recordId.slice(0, 100)}"`);
  if (!RECORD_ID.test(recordId)) throw noRecord;
  const version = input.version ?? null;
  if (
    version !== null &&
    (!Number.isInteger(version) || (version as number) < 1 || (version as number) > RELEASE_LIMITS.maxVersion)
  ) {
    throw new BadUserInput(`version must be an integer from 1 to ${RELEASE_LIMITS.maxVersion}`, { field: 'version' });
  }
  const id = await sql.begin(async (t) => {
    const tx = t as unknown as Sql;
    const rel = await lockChangeable(tx, projectId, input.releaseId, 'add to it');
    const [rec] = await tx<
      { id: string }[]
    >`select id from records where id = ${recordId} and project_id = ${projectId} and model_key = ${model.key} for share`;
    if (!rec) throw noRecord;
    let data: Record<string, Record<string, unknown>> | null = null;
    if (version !== null) {
      const entries = await tx<VersionEntry[]>`
        select action, locale, data, variant_id from record_versions where record_id = ${recordId} order by id limit ${version as number}`;
      if (entries.length < (version as number)) throw new NotFound(`Record "${recordId}" has no version ${version}`);
      data = contentAt(entries, defaultLocale);
      if (Object.keys(data).length === 0)
        throw new BadUserInput(`Version ${version} of record "${recordId}" has no content`, { field: 'version' });
    }
    const [count] = await tx<
      { n: number }[]
    >`select count(*)::int as n from release_items where release_id = ${rel.id} and record_id <> ${recordId}`;
    if (count!.n >= RELEASE_LIMITS.items)
      throw new BadUserInput(`A release holds at most ${RELEASE_LIMITS.items} records`, { field: 'recordId' });
    await tx`
      insert into release_items (release_id, project_id, record_id, model_key, version, data)
      values (${rel.id}, ${projectId}, ${recordId}, ${model.key}, ${version as number | null}, ${data === null ? null : tx.json(data as never)})
      on conflict (release_id, record_id) do update set version = excluded.version, data = excluded.data, added_at = now()`;
    await tx`update releases set updated_at = now() where id = ${rel.id}`;
    return rel.id;
  });
  return (await getRelease(sql, projectId, id))!;
}

export async function removeFromRelease(
  sql: Sql,
  projectId: string,
  releaseId: unknown,
  modelKey: string,
  recordId: unknown,
): Promise<ReleaseView> {
  const rid = typeof recordId === 'string' ? recordId.slice(0, 200) : '';
  const id = await sql.begin(async (t) => {
    const tx = t as unknown as Sql;
    const rel = await lockChangeable(tx, projectId, releaseId, 'remove from it');
    const gone =
      await tx`delete from release_items where release_id = ${rel.id} and record_id = ${rid} and model_key = ${String(modelKey).slice(0, 200)} returning 1`;
    if (gone.length === 0)
      throw new NotFound(`Release "${rel.id}" holds no ${String(modelKey).slice(0, 60)} record "${rid.slice(0, 100)}"`);
    await tx`update releases set updated_at = now() where id = ${rel.id}`;
    return rel.id;
  });
  return (await getRelease(sql, projectId, id))!;
}

export async function scheduleRelease(
  sql: Sql,
  projectId: string,
  releaseId: unknown,
  at: unknown,
  now = new Date(),
): Promise<ReleaseView> {
  const when = at instanceof Date ? at : typeof at === 'string' ? new Date(at) : new Date(Number.NaN);
  if (Number.isNaN(when.getTime())) throw new BadUserInput('at must be an ISO-8601 date-time', { field: 'at' });
  if (when.getTime() <= now.getTime()) throw new BadUserInput('at must be in the future', { field: 'at' });
  if (when.getTime() > now.getTime() + RELEASE_LIMITS.maxScheduleDays * 86_400_000)
    throw new BadUserInput(`at must be within ${RELEASE_LIMITS.maxScheduleDays} days`, { field: 'at' });
  const id = await sql.begin(async (t) => {
    const tx = t as unknown as Sql;
    const rel = await lockChangeable(tx, projectId, releaseId, 'schedule it');
    await tx`update releases set status = 'scheduled', at = ${when}, error = null, updated_at = now() where id = ${rel.id}`;
    return rel.id;
  });
  return (await getRelease(sql, projectId, id))!;
}

/** Discarding keeps the release (and its list) for the record; it can no longer change or go live. */
export async function discardRelease(sql: Sql, projectId: string, releaseId: unknown): Promise<ReleaseView> {
  const rid = checkReleaseId(releaseId);
  await sql.begin(async (t) => {
    const tx = t as unknown as Sql;
    const [row] = await tx<
      ReleaseRow[]
    >`select * from releases where id = ${rid} and project_id = ${projectId} for update`;
    if (!row) throw unknownRelease(rid);
    if (row.status === 'published') throw new Conflict(`Release "${rid}" is published: it cannot be discarded`);
    if (row.status !== 'discarded')
      await tx`update releases set status = 'discarded', at = null, updated_at = now() where id = ${rid}`;
  });
  return (await getRelease(sql, projectId, rid))!;
}
