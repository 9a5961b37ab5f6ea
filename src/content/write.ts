import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, Conflict } from '../errors.ts';
import { checkRequired, fileRefs, searchText, validateData, type ModelLookup } from './validate.ts';
import { desiredIndexes } from './indexes.ts';
import type { PendingEvent, Statement, WriteStep } from './tx.ts';
import { clientError } from './db-errors.ts';
import { run } from './db.ts';
import { newRecordId } from './record-ids.ts';
import type { ContentSql, Sql } from '../store/db.ts';

/** Defined beside the transaction that runs them (tx.ts), so the two files import one way. */
export type { PendingEvent, WriteStep };

/**
 * Record writes as statements (issue 11). Each function checks the input in JS (no I/O) and
 * returns the statements of one write; src/content/tx.ts sends them, with every other write of
 * the transaction and its NOTIFY, pipelined between BEGIN and COMMIT. Checks that depend on
 * stored rows (the record exists, required fields of merged content) run in SQL
 * (sql/009_records_write.sql) and fail the statement, so the transaction never waits on JS.
 * Each write is one call of a PL/pgSQL function (sql/016_write_functions.sql, 027_write_rows.sql)
 * whose statements PostgreSQL plans once per connection, not once per message; creates, updates,
 * publishes and unpublishes answer with the record as they left it (`WriteStep.row`).
 *
 * Columns a write sets are listed once per statement; adding one (an owner, a variant) means a
 * parameter and a column in the statement of each write that sets it. Variant writes are in
 * write-variants.ts, record ids in record-ids.ts.
 */

export interface WriteContext {
  projectId: string;
  defaultLocale: string;
  userId: string | null;
  models: ModelLookup;
}

export const isVersioned = (m: ModelDef): boolean => m.versioned !== false;

/** Fields whose text goes into the search vector, in model order (searchText in validate.ts). */
export function searchKeys(model: ModelDef): string[] {
  return model.fields
    .filter(
      (f) =>
        !f.access?.read &&
        (f.type === 'text' ||
          f.type === 'richtext' ||
          f.type === 'flexible' ||
          (f.type === 'list' && (f.itemType ?? 'text') === 'text')),
    )
    .map((f) => f.key);
}

export const requiredKeys = (model: ModelDef): string[] => model.fields.filter((f) => f.required).map((f) => f.key);

/**
 * A value too large for its field's btree index (src/content/indexes.ts) is the client's input.
 * PostgreSQL names the index only in some of these errors; otherwise the longest string among
 * the indexed fields written is the culprit.
 */
export function tooLongToIndex(
  err: unknown,
  projectId: string,
  model: ModelDef,
  data: Record<string, unknown>,
): BadUserInput | undefined {
  const e = err as { code?: string; message?: string };
  if (e?.code !== '54000') return undefined;
  const indexed = desiredIndexes(projectId, [model]);
  let field = indexed.find((i) => e.message?.includes(i.name))?.fieldKey;
  if (!field) {
    const longest = indexed
      .map((i) => ({
        key: i.fieldKey,
        len: typeof data[i.fieldKey] === 'string' ? (data[i.fieldKey] as string).length : 0,
      }))
      .sort((a, b) => b.len - a.len)[0];
    if (!longest || longest.len === 0) return undefined;
    field = longest.key;
  }
  return new BadUserInput(`Value of queryable field "${field}" is too long to index`, { field });
}

/** Locks the record (FOR UPDATE) or fails the transaction with NOT_FOUND and `message` (svc_lock_record). */
export function lockOrNotFound(ctx: WriteContext, model: ModelDef, id: string, message: string): Statement {
  return {
    text: `select svc_lock_record($1::text, $2::text, $3::text, $4::text)`,
    params: [ctx.projectId, id, model.key, message],
  };
}

/**
 * One check per file a write names: a live (not soft-deleted) file of this project, of the
 * field's kind (images for image fields, videos for video fields). Another project's file id
 * fails like an unknown one.
 */
export function fileChecks(ctx: WriteContext, model: ModelDef, data: Record<string, unknown>): Statement[] {
  return fileRefs(model, data, ctx.models).map((r) => ({
    text: `select svc_check(exists(select 1 from files where id = $1::text and project_id = $2::text and deleted_at is null and starts_with(content_type, $3::text)), 'SV400', $4::text, $5::text)`,
    params: [
      r.fileId,
      ctx.projectId,
      r.typePrefix,
      `Field "${r.field}": no ${r.typePrefix ? `${r.typePrefix.slice(0, -1)} ` : ''}file ${r.fileId} in this project`,
      r.field,
    ],
  }));
}

/** The NOT_FOUND message of a write to a record that is not there. */
export const noRecordMessage = (model: ModelDef, id: string) => `No ${model.key} record with _id "${id}"`;

export interface CreateInput {
  naturalKey?: string | null;
  locale?: string | null;
  data: unknown;
}

export function createRecord(ctx: WriteContext, model: ModelDef, input: CreateInput): WriteStep {
  const locale = input.locale || ctx.defaultLocale;
  const data = validateData(model, input.data ?? {}, ctx.models, { partial: false });
  if (!isVersioned(model)) checkRequired(model, data);
  if (
    input.naturalKey !== undefined &&
    input.naturalKey !== null &&
    (typeof input.naturalKey !== 'string' || input.naturalKey.length === 0 || input.naturalKey.length > 500)
  ) {
    throw new BadUserInput('naturalKey must be a non-empty string of at most 500 characters', { field: 'naturalKey' });
  }
  const id = newRecordId();
  const versioned = isVersioned(model);
  const json = JSON.stringify(data);
  // One statement (svc_write_create, sql/027_write_rows.sql): the record, its content (draft,
  // and published for unversioned models) and the history entry; it answers with the record, so
  // the mutation reads nothing back. A duplicate natural key fails it (unique violation) and with
  // it the transaction.
  const statement: Statement = {
    text: `select * from svc_write_create($1::text, $2::text, $3::text, $4::text, $5::boolean, $6::text, $7::text, $8::text::jsonb, $9::text)`,
    prepared: true,
    params: [
      id,
      ctx.projectId,
      model.key,
      input.naturalKey ?? null,
      versioned,
      ctx.userId,
      locale,
      json,
      searchText(model, data),
    ],
    mapError: (err) => {
      const e = err as { code?: string; constraint?: string };
      if (e?.code === '23505' && e.constraint === 'records_natural_key')
        return new Conflict(`A ${model.key} record with naturalKey "${input.naturalKey}" already exists`);
      return tooLongToIndex(err, ctx.projectId, model, data);
    },
  };
  const checks = fileChecks(ctx, model, data);
  return {
    recordId: id,
    statements: [...checks, statement],
    row: checks.length,
    event: { action: 'created', recordId: id, modelKey: model.key },
    created: { model, naturalKey: input.naturalKey ?? null, locale, data, id },
  };
}

export function updateRecord(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  localeArg: string | null | undefined,
  dataArg: unknown,
  notFoundMessage = noRecordMessage(model, id),
): WriteStep {
  const locale = localeArg || ctx.defaultLocale;
  const patch = validateData(model, dataArg ?? {}, ctx.models, { partial: true });
  const versioned = isVersioned(model);
  const json = JSON.stringify(patch);
  // The patch goes over the working content of the locale; a locale written for the first time
  // starts as a copy of the default locale's, so a translation may change only what it
  // translates. Unversioned models check required fields of the result (svc_update_record locks
  // the record or fails with NOT_FOUND, then merges, checks and writes).
  const statement: Statement = {
    text: `select * from svc_write_update($1::text, $2::text, $3::text, $4::text, $5::text, $6::text::jsonb, $7::text[], $8::text[], $9::boolean, $10::text, $11::text)`,
    prepared: true,
    params: [
      id,
      ctx.projectId,
      model.key,
      locale,
      ctx.defaultLocale,
      json,
      versioned ? [] : requiredKeys(model),
      searchKeys(model),
      versioned,
      ctx.userId,
      notFoundMessage,
    ],
    mapError: (err) => tooLongToIndex(err, ctx.projectId, model, patch),
  };
  return {
    recordId: id,
    statements: [statement, ...fileChecks(ctx, model, patch)],
    row: 0,
    event: { action: 'updated', recordId: id, modelKey: model.key },
  };
}

/**
 * Copies every locale of the working version to published; required fields are checked per
 * locale. svc_publish_record locks the record (or fails with NOT_FOUND) first.
 */
export function publishRecord(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  notFoundMessage = noRecordMessage(model, id),
): WriteStep {
  return publishStep(model, id, 'published', {
    text: `select * from svc_write_publish($1::text, $2::text, $3::text, $4::text, $5::text[], $6::text, $7::text, $8::text)`,
    prepared: true,
    params: [
      id,
      ctx.projectId,
      model.key,
      ctx.userId,
      requiredKeys(model),
      notFoundMessage,
      ctx.defaultLocale,
      ctx.defaultLocale,
    ],
  });
}

export function unpublishRecord(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  notFoundMessage = noRecordMessage(model, id),
): WriteStep {
  return publishStep(model, id, 'unpublished', {
    text: `select * from svc_write_unpublish($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text)`,
    prepared: true,
    params: [id, ctx.projectId, model.key, ctx.userId, notFoundMessage, ctx.defaultLocale, ctx.defaultLocale],
  });
}

/**
 * A publish or unpublish: its one statement locks the record (or fails with NOT_FOUND) and
 * answers with the record as it left it (`row` 0).
 */
function publishStep(
  model: ModelDef,
  id: string,
  action: 'published' | 'unpublished',
  statement: Statement,
): WriteStep {
  return { recordId: id, statements: [statement], row: 0, event: { action, recordId: id, modelKey: model.key } };
}

export function deleteRecord(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  notFoundMessage = noRecordMessage(model, id),
): WriteStep {
  const statement: Statement = {
    text: `select svc_delete_record($1::text, $2::text, $3::text, $4::text)`,
    params: [ctx.projectId, id, model.key, notFoundMessage],
  };
  return { recordId: id, statements: [statement], event: { action: 'deleted', recordId: id, modelKey: model.key } };
}

/**
 * Runs a write's statements one by one in the caller's transaction, for flows that must read
 * and decide inside it (a collaboration room merges what committed since it last looked).
 * Errors come out as the write's own (NOT_FOUND, BAD_USER_INPUT, CONFLICT).
 */
export async function runStep(tx: Sql | ContentSql, step: WriteStep): Promise<void> {
  for (const st of step.statements) {
    try {
      await run(tx, st.text, st.params);
    } catch (err) {
      throw clientError(err, [st]);
    }
  }
}

/** The models of records addressed by `_id` only (batch operations without modelKey): one statement. */
export function modelKeysOf(projectId: string, ids: readonly string[]): Statement {
  return {
    text: `select id, model_key from records where project_id = $1::text and id = any($2::text[])`,
    params: [projectId, [...ids]],
  };
}
