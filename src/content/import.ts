import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, Conflict } from '../errors.ts';
import { checkRequired, searchText, validateData, type ModelLookup } from './validate.ts';
import { fileChecks, tooLongToIndex, type WriteContext, type WriteStep } from './write.ts';
import { newRecordId } from './record-ids.ts';
import type { Statement } from './tx.ts';
import type { DbError } from './db-errors.ts';

/**
 * Bulk creation (`importRecords`, `svc records import`, issue 11): up to 500 records of one
 * request in ONE statement — unnest of the rows into records, record_content and
 * record_versions — instead of one statement per record. Records are addressed by natural key,
 * and a natural key that already exists is skipped, so an interrupted import runs again from
 * the start and creates only what is missing (the existing keys are read with BEGIN, see
 * WriteTx.prelude).
 */
export interface ImportInput {
  modelKey: string;
  naturalKey: string;
  locale?: string | null;
  data?: unknown;
}

export const MAX_IMPORT_RECORDS = 500;

/** The statement reading which natural keys exist already (the prelude). */
export function existingKeys(projectId: string, inputs: readonly ImportInput[]): Statement {
  return {
    text: `select model_key, natural_key from records where project_id = $1::text and (model_key, natural_key) in (select * from unnest($2::text[], $3::text[]))`,
    params: [projectId, inputs.map((i) => i.modelKey), inputs.map((i) => i.naturalKey)],
  };
}

export interface Checked {
  model: ModelDef;
  naturalKey: string | null;
  locale: string;
  data: Record<string, unknown>;
  /** Set when the id was made already (a create of batchRecordOperations). */
  id?: string;
  input?: ImportInput;
}

/** Checks every input (JS only); errors name `records.<i>`. */
export function checkImport(
  ctx: WriteContext,
  models: (key: string) => ModelDef | undefined,
  inputs: readonly ImportInput[],
  lookup: ModelLookup,
): Checked[] {
  if (inputs.length > MAX_IMPORT_RECORDS)
    throw new BadUserInput(`At most ${MAX_IMPORT_RECORDS} records per import`, { field: 'records' });
  const seen = new Set<string>();
  return inputs.map((input, i) => {
    const model = models(input.modelKey);
    if (!model) throw new BadUserInput(`records.${i}.modelKey names no model`, { field: `records.${i}.modelKey` });
    if (typeof input.naturalKey !== 'string' || input.naturalKey.length === 0 || input.naturalKey.length > 500) {
      throw new BadUserInput(`records.${i}.naturalKey must be a non-empty string of at most 500 characters`, {
        field: `records.${i}.naturalKey`,
      });
    }
    const key = `${model.key}\0${input.naturalKey}`;
    if (seen.has(key))
      throw new BadUserInput(`records.${i}: naturalKey "${input.naturalKey}" appears twice in this import`, {
        field: `records.${i}.naturalKey`,
      });
    seen.add(key);
    try {
      const data = validateData(model, input.data ?? {}, lookup, { partial: false, path: `records.${i}.data` });
      if (model.versioned === false) checkRequired(model, data);
      return { model, input, naturalKey: input.naturalKey, locale: input.locale || ctx.defaultLocale, data };
    } catch (err) {
      if (err instanceof BadUserInput && !err.message.includes(`records.${i}`))
        throw new BadUserInput(`records.${i}: ${err.message}`, err.details);
      throw err;
    }
  });
}

/**
 * One statement creating every record given (those whose natural key did not exist). With
 * `returning`, it answers with the records as created (the columns of a read-back, in input
 * order), so a batch of creates reads nothing back; an import asks for nothing.
 */
export function createMany(
  ctx: WriteContext,
  rows: readonly Checked[],
  opts: { returning?: boolean } = {},
): { statement: Statement; steps: WriteStep[] } {
  const ids = rows.map((r) => r.id ?? newRecordId());
  const statement: Statement = {
    text: `with x as (
        select u.id, u.model_key, u.natural_key, u.locale, u.data::jsonb as data, u.search, u.versioned, u.i
        from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[])
          with ordinality as u(id, model_key, natural_key, locale, data, search, versioned, i)
      ), r as (
        insert into records (id, project_id, model_key, natural_key, has_draft, published_at, created_by, updated_by)
        select id, $8::text, model_key, natural_key, versioned, case when versioned then null else now() end, $9::text, $9::text from x
      ), c as (
        insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
        select x.id, $8::text, x.model_key, s.stage, x.locale, x.data, to_tsvector('simple', x.search), now()
        from x cross join lateral unnest(case when x.versioned then array['draft'] else array['draft', 'published'] end) as s(stage)
      )${
        opts.returning
          ? `, v as (
        insert into record_versions (record_id, project_id, action, locale, data, user_id)
        select x.id, $8::text, 'created', x.locale, x.data, $9::text from x
      )
      select x.id, x.model_key, x.natural_key, x.versioned as has_draft, now() as created_at, now() as updated_at,
        case when x.versioned then null else now() end as published_at, null::text as owner_customer_id, x.data as data, null::jsonb as variants
      from x order by x.i`
          : `
      insert into record_versions (record_id, project_id, action, locale, data, user_id)
      select x.id, $8::text, 'created', x.locale, x.data, $9::text from x`
      }`,
    params: [
      ids,
      rows.map((r) => r.model.key),
      rows.map((r) => r.naturalKey),
      rows.map((r) => r.locale),
      rows.map((r) => JSON.stringify(r.data)),
      rows.map((r) => searchText(r.model, r.data)),
      rows.map((r) => r.model.versioned !== false),
      ctx.projectId,
      ctx.userId,
    ],
  };
  const steps = rows.map(
    (r, i): WriteStep => ({
      recordId: ids[i]!,
      statements: fileChecks(ctx, r.model, r.data),
      event: { action: 'created', recordId: ids[i]!, modelKey: r.model.key },
    }),
  );
  return {
    statement: { ...statement, mapError: (err) => conflictOf(err, rows) ?? tooLongOf(err, ctx.projectId, rows) },
    steps,
  };
}

/** A duplicate natural key, named as a single create names it (PostgreSQL's DETAIL carries the key). */
function conflictOf(err: DbError, rows: readonly Checked[]): Conflict | undefined {
  if (err.code !== '23505' || err.constraint !== 'records_natural_key') return undefined;
  const dup = rows.find((r) => r.naturalKey !== null && err.detail?.includes(`, ${r.model.key}, ${r.naturalKey})`));
  return dup
    ? new Conflict(`A ${dup.model.key} record with naturalKey "${dup.naturalKey}" already exists`)
    : new Conflict('A record with one of these natural keys already exists');
}

function tooLongOf(err: DbError, projectId: string, rows: readonly Checked[]): BadUserInput | undefined {
  for (const r of rows) {
    const e = tooLongToIndex(err, projectId, r.model, r.data);
    if (e) return e;
  }
  return undefined;
}
