import { randomBytes } from 'node:crypto';
import type { ContentSql, Sql } from '../store/db.ts';

/** Record writes run on either pool: the content API uses Bun's, the CLI/control plane postgres.js. */
type Tx = Sql | ContentSql;
import type { ModelDef } from '../models/types.ts';
import { Conflict, NotFound, BadUserInput } from '../errors.ts';
import { run } from './db.ts';
import { checkRequired, searchText, validateData, type ModelLookup } from './validate.ts';
import type { RecordAction } from './types.ts';
import { desiredIndexes } from './indexes.ts';

/**
 * Record writes. Each function runs inside the caller's transaction and queues its change
 * event on the WriteContext; `commitWrites` publishes them only after the commit, so a
 * rolled-back write (a failed batch) announces nothing.
 */
export interface PendingEvent {
  action: RecordAction;
  recordId: string;
  modelKey: string;
}

export interface WriteContext {
  projectId: string;
  defaultLocale: string;
  userId: string | null;
  models: ModelLookup;
  events: PendingEvent[];
}

let lastMs = 0;
let seq = 0;

/**
 * Record ids sort by creation time: a ms timestamp, then a per-process sequence (so ids made
 * within one ms keep their order), then randomness. Default list order is id order, which the
 * primary-key-like index serves, so it is creation order.
 */
export function newRecordId(): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    seq = 0;
  } else seq++;
  return `rec_${lastMs.toString(16).padStart(12, '0')}${seq.toString(16).padStart(6, '0')}${randomBytes(6).toString('hex')}`;
}

const isVersioned = (m: ModelDef): boolean => m.versioned !== false;

async function putContent(tx: Tx, ctx: WriteContext, model: ModelDef, id: string, stage: 'draft' | 'published', locale: string, data: Record<string, unknown>): Promise<void> {
  await run(tx, `insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
      values ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text::jsonb, to_tsvector('simple', $7::text), now())
      on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, updated_at = now()`,
    [id, ctx.projectId, model.key, stage, locale, JSON.stringify(data), searchText(model, data)]).catch((err) => {
    throw tooLongToIndex(err, ctx.projectId, model, data) ?? err;
  });
}

/**
 * A value too large for its field's btree index (src/content/indexes.ts) is the client's input.
 * PostgreSQL names the index only in some of these errors; otherwise the longest string among
 * the indexed fields written is the culprit.
 */
function tooLongToIndex(err: unknown, projectId: string, model: ModelDef, data: Record<string, unknown>): BadUserInput | undefined {
  const e = err as { code?: string; message?: string };
  if (e?.code !== '54000') return undefined;
  const indexed = desiredIndexes(projectId, [model]);
  let field = indexed.find((i) => e.message?.includes(i.name))?.fieldKey;
  if (!field) {
    const longest = indexed
      .map((i) => ({ key: i.fieldKey, len: typeof data[i.fieldKey] === 'string' ? (data[i.fieldKey] as string).length : 0 }))
      .sort((a, b) => b.len - a.len)[0];
    if (!longest || longest.len === 0) return undefined;
    field = longest.key;
  }
  return new BadUserInput(`Value of queryable field "${field}" is too long to index`, { field });
}

async function history(tx: Tx, ctx: WriteContext, id: string, action: string, locale: string | null, data: unknown): Promise<void> {
  await run(tx, `insert into record_versions (record_id, project_id, action, locale, data, user_id)
      values ($1::text, $2::text, $3::text, $4::text, $5::text::jsonb, $6::text)`,
    [id, ctx.projectId, action, locale, data === null ? null : JSON.stringify(data), ctx.userId]);
}

async function lockRecord(tx: Tx, ctx: WriteContext, model: ModelDef, id: string): Promise<void> {
  const rows = await run(tx, `select id from records where project_id = $1::text and id = $2::text and model_key = $3::text for update`, [ctx.projectId, id, model.key]);
  if (rows.length === 0) throw new NotFound(`No ${model.key} record with _id "${id}"`);
}

export interface CreateInput {
  naturalKey?: string | null;
  locale?: string | null;
  data: unknown;
}

export async function createRecord(tx: Tx, ctx: WriteContext, model: ModelDef, input: CreateInput): Promise<string> {
  const locale = input.locale || ctx.defaultLocale;
  const data = validateData(model, input.data ?? {}, ctx.models, { partial: false });
  if (!isVersioned(model)) checkRequired(model, data);
  if (input.naturalKey !== undefined && input.naturalKey !== null && (typeof input.naturalKey !== 'string' || input.naturalKey.length === 0 || input.naturalKey.length > 500)) {
    throw new BadUserInput('naturalKey must be a non-empty string of at most 500 characters', { field: 'naturalKey' });
  }
  const id = newRecordId();
  const versioned = isVersioned(model);
  // One statement: the record, its content (draft, and published for unversioned models) and the
  // history entry. ON CONFLICT DO NOTHING leaves `r` empty on a duplicate natural key, so nothing
  // else is written and the transaction stays usable for a clean CONFLICT.
  const inserted = await run(tx, `with r as (
        insert into records (id, project_id, model_key, natural_key, has_draft, published_at, created_by, updated_by)
        values ($1::text, $2::text, $3::text, $4::text, $5::boolean, case when $5::boolean then null else now() end, $6::text, $6::text)
        on conflict do nothing returning id
      ), c as (
        insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
        select r.id, $2::text, $3::text, s.stage, $7::text, $8::text::jsonb, to_tsvector('simple', $9::text), now()
        from r cross join unnest($10::text[]) as s(stage)
      ), v as (
        insert into record_versions (record_id, project_id, action, locale, data, user_id)
        select r.id, $2::text, 'created', $7::text, $8::text::jsonb, $6::text from r
      )
      select id from r`,
    [id, ctx.projectId, model.key, input.naturalKey ?? null, versioned, ctx.userId, locale, JSON.stringify(data), searchText(model, data), versioned ? ['draft'] : ['draft', 'published']]).catch((err) => {
    throw tooLongToIndex(err, ctx.projectId, model, data) ?? err;
  });
  if (inserted.length === 0) throw new Conflict(`A ${model.key} record with naturalKey "${input.naturalKey}" already exists`);
  ctx.events.push({ action: 'created', recordId: id, modelKey: model.key });
  return id;
}

export async function updateRecord(tx: Tx, ctx: WriteContext, model: ModelDef, id: string, localeArg: string | null | undefined, dataArg: unknown): Promise<void> {
  const locale = localeArg || ctx.defaultLocale;
  const patch = validateData(model, dataArg ?? {}, ctx.models, { partial: true });
  await lockRecord(tx, ctx, model, id);
  // A locale written for the first time starts as a copy of the default locale's working
  // content, so a translation may change only the fields it translates.
  const rows = await run<{ locale: string; data: Record<string, unknown> }>(tx,
    `select locale, data from record_content where record_id = $1::text and stage = 'draft' and locale in ($2::text, $3::text)`,
    [id, locale, ctx.defaultLocale]);
  const current = rows.find((r) => r.locale === locale) ?? rows.find((r) => r.locale === ctx.defaultLocale);
  const merged = { ...(current?.data ?? {}), ...patch };
  const versioned = isVersioned(model);
  if (!versioned) checkRequired(model, merged);
  await putContent(tx, ctx, model, id, 'draft', locale, merged);
  if (!versioned) await putContent(tx, ctx, model, id, 'published', locale, merged);
  await run(tx, `update records set updated_at = now(), updated_by = $2::text, has_draft = $3::boolean,
      published_at = case when $3::boolean then published_at else now() end where id = $1::text`, [id, ctx.userId, versioned]);
  await history(tx, ctx, id, 'updated', locale, patch);
  ctx.events.push({ action: 'updated', recordId: id, modelKey: model.key });
}

/** Copies every locale of the working version to published; required fields are checked per locale. */
export async function publishRecord(tx: Tx, ctx: WriteContext, model: ModelDef, id: string): Promise<void> {
  // Lock the record and read its working locales in one round trip.
  const drafts = await run<{ locale: string | null; data: Record<string, unknown> | null }>(tx,
    `select c.locale, c.data from records r
       left join record_content c on c.record_id = r.id and c.stage = 'draft'
     where r.project_id = $1::text and r.id = $2::text and r.model_key = $3::text for update of r`,
    [ctx.projectId, id, model.key]);
  if (drafts.length === 0) throw new NotFound(`No ${model.key} record with _id "${id}"`);
  for (const d of drafts) if (d.data) checkRequired(model, d.data);
  // Published locales without a working version go; the others are overwritten from it. The two
  // sets are disjoint, so the sub-statements cannot trip over each other.
  await run(tx, `with gone as (
        delete from record_content p where p.record_id = $1::text and p.stage = 'published'
          and not exists (select 1 from record_content d where d.record_id = $1::text and d.stage = 'draft' and d.locale = p.locale)
      ), copied as (
        insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
        select record_id, project_id, model_key, 'published', locale, data, search, now()
        from record_content where record_id = $1::text and stage = 'draft'
        on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, updated_at = now()
      ), marked as (
        update records set published_at = now(), has_draft = false, updated_by = $2::text where id = $1::text
      )
      insert into record_versions (record_id, project_id, action, locale, data, user_id)
      values ($1::text, $3::text, 'published', null, null, $2::text)`,
    [id, ctx.userId, ctx.projectId]);
  ctx.events.push({ action: 'published', recordId: id, modelKey: model.key });
}

export async function unpublishRecord(tx: Tx, ctx: WriteContext, model: ModelDef, id: string): Promise<void> {
  await lockRecord(tx, ctx, model, id);
  await run(tx, `delete from record_content where record_id = $1::text and stage = 'published'`, [id]);
  await run(tx, `update records set published_at = null, has_draft = true, updated_by = $2::text where id = $1::text`, [id, ctx.userId]);
  await history(tx, ctx, id, 'unpublished', null, null);
  ctx.events.push({ action: 'unpublished', recordId: id, modelKey: model.key });
}

export async function deleteRecord(tx: Tx, ctx: WriteContext, model: ModelDef, id: string): Promise<void> {
  const rows = await run(tx, `delete from records where project_id = $1::text and id = $2::text and model_key = $3::text returning id`, [ctx.projectId, id, model.key]);
  if (rows.length === 0) throw new NotFound(`No ${model.key} record with _id "${id}"`);
  ctx.events.push({ action: 'deleted', recordId: id, modelKey: model.key });
}

/** The model of a record, for generic operations addressed by `_id` only. */
export async function modelKeyOf(tx: Tx, projectId: string, id: string): Promise<string | null> {
  const [row] = await run<{ model_key: string }>(tx, `select model_key from records where project_id = $1::text and id = $2::text`, [projectId, id]);
  return row?.model_key ?? null;
}
