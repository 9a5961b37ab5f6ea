import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import { run } from '../content/db.ts';
import { checkRequired, validateData } from '../content/validate.ts';
import {
  fileChecks,
  isVersioned,
  noRecordMessage,
  requiredKeys,
  searchKeys,
  type WriteContext,
  type WriteStep,
} from '../content/write.ts';
import type { ContentSql, Sql } from '../store/db.ts';

/**
 * Restore any version (docs/restore.md). A version is a position in a record's history as
 * `recordVersions` numbers it (1 = the create). History rows hold what each write sent, so the
 * content as of version N is the history replayed up to N, per locale:
 *
 * - `created`: the locale's content is what was sent;
 * - `updated` (default content): the patch over the locale's content, or over the default
 *   locale's when the locale had none yet (what svc_write_update does);
 * - `restored`: every locale's content is the one the row holds;
 * - publishes, unpublishes and variant writes leave the default content as it was.
 *
 * History is never rewritten, so the content of a version never changes: it is read outside the
 * write transaction, and the write (svc_write_restore, sql/040_restore.sql) sets it absolutely.
 */
export type Localised = Record<string, Record<string, unknown>>;

interface HistoryRow {
  action: string;
  locale: string | null;
  data: Record<string, unknown> | null;
  variant_id: string | null;
}

/** The largest version number accepted (a history is read up to the version asked for). */
export const MAX_VERSION = 1_000_000;

export function checkVersion(version: unknown, field = 'version'): number {
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1 || version > MAX_VERSION) {
    throw new BadUserInput(`${field} must be a whole number from 1 (the first version) to ${MAX_VERSION}`, { field });
  }
  return version;
}

/** Replays history rows (oldest first) into content per locale. Pure; exported for tests. */
export function replay(rows: readonly HistoryRow[], defaultLocale: string): Localised {
  let state: Localised = {};
  for (const r of rows) {
    if (r.variant_id !== null && r.variant_id !== 'default') continue;
    if (!r.data || typeof r.data !== 'object') continue;
    if (r.action === 'restored') state = { ...(r.data as Localised) };
    else if (r.action === 'created' && r.locale) state[r.locale] = { ...r.data };
    else if (r.action === 'updated' && r.locale)
      state[r.locale] = { ...(state[r.locale] ?? state[defaultLocale] ?? {}), ...r.data };
  }
  return state;
}

/**
 * The content of `version` of a record of `model` in the project: NOT_FOUND for a record that is
 * not this model's in this project (another project's record included), BAD_USER_INPUT for a
 * version the record does not have. One query, reading at most `version` rows.
 */
export async function contentAt(
  sql: Sql | ContentSql,
  projectId: string,
  model: ModelDef,
  recordId: string,
  version: number,
  defaultLocale: string,
): Promise<Localised> {
  const rows = await run<HistoryRow & { n: string | number; found: boolean }>(
    sql,
    `select v.action, v.locale, v.data, v.variant_id, (select count(*) from record_versions c where c.record_id = r.id) as n, true as found
     from records r left join lateral (select * from record_versions x where x.record_id = r.id order by x.id limit $4::int) v on true
     where r.id = $1::text and r.project_id = $2::text and r.model_key = $3::text`,
    [recordId, projectId, model.key, version],
  );
  if (rows.length === 0) throw new NotFound(`No ${model.key} record with _id "${recordId}"`);
  const total = Number(rows[0]!.n);
  if (version > total)
    throw new BadUserInput(`Record "${recordId}" has no version ${version} (it has ${total})`, { field: 'version' });
  return replay(
    rows.filter((r) => r.action !== null),
    defaultLocale,
  );
}

/**
 * The content as the current model takes it: fields since removed from the model are dropped
 * (they could not be written today), everything else is checked as a write would check it. A
 * value that no longer fits its field (its type changed since) is BAD_USER_INPUT.
 */
export function fitContent(ctx: WriteContext, model: ModelDef, content: Localised, version: number): Localised {
  const keys = new Set(model.fields.map((f) => f.key));
  const out: Localised = {};
  for (const [locale, data] of Object.entries(content)) {
    const kept: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(data)) if (keys.has(k) && v !== null && v !== undefined) kept[k] = v;
    try {
      out[locale] = validateData(model, kept, ctx.models, { partial: true });
    } catch (err) {
      if (err instanceof BadUserInput)
        throw new BadUserInput(`Version ${version} no longer fits model ${model.key}: ${err.message}`, {
          field: 'version',
        });
      throw err;
    }
  }
  return out;
}

/**
 * The write of a restore: the working version becomes `content` (one history entry, action
 * `restored`, naming `version`), answering with the record in `locale`. It announces `updated`,
 * so every listener treats it as the edit it is: a live collaboration room merges it into its
 * document as one update (src/collab/room-persist.ts), caches drop the record.
 */
export function restoreStep(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  content: Localised,
  version: number,
  locale: string | null | undefined,
): WriteStep {
  const versioned = isVersioned(model);
  if (!versioned) for (const data of Object.values(content)) checkRequired(model, data);
  const checks = Object.values(content).flatMap((data) => fileChecks(ctx, model, data));
  return {
    recordId: id,
    statements: [
      {
        text: `select * from svc_write_restore($1::text, $2::text, $3::text, $4::text, $5::text::jsonb, $6::int, $7::text[], $8::text[], $9::boolean, $10::text, $11::text, $12::text)`,
        params: [
          id,
          ctx.projectId,
          model.key,
          ctx.userId,
          JSON.stringify(content),
          version,
          versioned ? [] : requiredKeys(model),
          searchKeys(model),
          versioned,
          noRecordMessage(model, id),
          locale || ctx.defaultLocale,
          ctx.defaultLocale,
        ],
      },
      ...checks,
    ],
    row: 0,
    event: { action: 'updated', recordId: id, modelKey: model.key },
  };
}
