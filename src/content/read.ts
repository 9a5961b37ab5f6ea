import type { ModelDef } from '../projects/types.ts';
import { run, type Reader } from './db.ts';
import {
  afterSql,
  decodeCursor,
  literalKey,
  localeSql,
  orderSql,
  Params,
  sliceValue,
  sortKeys,
  sortSelect,
  whereSql,
} from './sql-builder.ts';
import type { ContentRow, ReadScope } from './types.ts';

/** Read queries over records; each is exactly one round trip to PostgreSQL. */
const COLS = `r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, c.data, c.variants`;
const CONTENT_COLS = `c.record_id as id, c.model_key, c.data, c.variants`;

/**
 * Where a read finds content: `record_content`, or for a release preview (ReadScope.release) the
 * published content with the release's versions in their place, shaped like `record_content`
 * (stage 'published'), so every read statement keeps its text around it. A record in the
 * release shows its working version (item without a version) or the pinned version's content
 * (release_items.data, one entry per locale); every other record its published content.
 */
export function contentSource(p: Params, scope: ReadScope): string {
  if (scope.release === undefined) return 'record_content';
  const project = p.add(scope.projectId);
  const rel = p.add(scope.release);
  return `(select k.record_id, k.project_id, k.model_key, k.stage, k.locale, k.data, k.search, k.updated_at, k.variants
      from record_content k
      where k.project_id = ${project} and k.stage = 'published'
        and not exists (select 1 from release_items i where i.release_id = ${rel} and i.record_id = k.record_id)
    union all
    select k.record_id, k.project_id, k.model_key, 'published', k.locale, k.data, k.search, k.updated_at, k.variants
      from release_items i join record_content k on k.record_id = i.record_id and k.stage = 'draft'
      where i.release_id = ${rel} and i.project_id = ${project} and i.version is null
    union all
    select i.record_id, i.project_id, i.model_key, 'published', e.key, e.value, ''::tsvector, i.added_at,
        (select w.variants from record_content w where w.record_id = i.record_id and w.stage = 'draft' and w.locale = e.key)
      from release_items i cross join lateral jsonb_each(i.data) e
      where i.release_id = ${rel} and i.project_id = ${project} and i.version is not null)`;
}

/**
 * The reader's row restrictions (model `access.read`, ReadScope.rows) as conditions on the
 * records join `r`. With `modelKey` (one-model reads) only that model's rule, else all of them.
 * Empty when nothing is restricted, so the common statements keep their text.
 */
export function rowsSql(p: Params, scope: ReadScope, modelKey?: string): string {
  const rows = scope.rows;
  if (!rows) return '';
  if (modelKey !== undefined) {
    if (rows.closed.includes(modelKey)) return ' and false';
    if (rows.owned.includes(modelKey))
      return rows.viewer === null ? ' and false' : ` and r.owner_customer_id = ${p.add(rows.viewer)}`;
    return '';
  }
  let out = '';
  if (rows.closed.length) out += ` and c.model_key <> all(${p.add([...rows.closed], 'text[]')})`;
  if (rows.owned.length) {
    out +=
      rows.viewer === null
        ? ` and c.model_key <> all(${p.add([...rows.owned], 'text[]')})`
        : ` and (c.model_key <> all(${p.add([...rows.owned], 'text[]')}) or r.owner_customer_id = ${p.add(rows.viewer)})`;
  }
  return out;
}

/** Whether a one-model read of this scope must join `records` for its row restriction. */
export function restrictsModel(scope: ReadScope, modelKey: string): boolean {
  return !!scope.rows && (scope.rows.closed.includes(modelKey) || scope.rows.owned.includes(modelKey));
}

/**
 * Records by id in one query (batched reference/select/`record` resolution). One row per id,
 * in the requested locale or else the default locale.
 */
export async function readByIds(
  sql: Reader,
  scope: ReadScope,
  ids: readonly string[],
  modelKeys?: readonly string[] | null,
): Promise<Map<string, ContentRow>> {
  const out = new Map<string, ContentRow>();
  if (ids.length === 0) return out;
  const q = byIdsStatement(scope, ids, modelKeys);
  for (const row of await run<ContentRow>(sql, q.text, q.params)) out.set(row.id, row);
  return out;
}

/** The statement of `readByIds`, for a write transaction to read back what it wrote (src/content/tx.ts). */
export function byIdsStatement(
  scope: ReadScope,
  ids: readonly string[],
  modelKeys?: readonly string[] | null,
): { text: string; params: unknown[] } {
  const p = new Params();
  const models = modelKeys ? ` and c.model_key = any(${p.add([...modelKeys], 'text[]')})` : '';
  const project = p.add(scope.projectId);
  const idList = p.add([...ids], 'text[]');
  const stage = p.add(scope.stage);
  const loc = p.add(scope.locale);
  const text = `select distinct on (c.record_id) ${COLS}
    from ${contentSource(p, scope)} c join records r on r.id = c.record_id
    where c.project_id = ${project} and c.record_id = any(${idList})
      and c.stage = ${stage} and c.locale in (${loc}, ${p.add(scope.defaultLocale)})${models}${rowsSql(p, scope)}
    order by c.record_id, (c.locale = ${loc}) desc`;
  return { text, params: p.values };
}

/**
 * `byIdsStatement` for a write transaction's read-back: the same rows through
 * svc_records_by_ids (sql/016_write_functions.sql), whose plan PostgreSQL keeps per connection.
 * A scope with row restrictions (customers' reads) takes byIdsStatement, which applies them.
 */
export function writtenStatement(
  scope: ReadScope,
  ids: readonly string[],
  modelKeys?: readonly string[] | null,
): { text: string; params: unknown[] } {
  if (scope.rows || scope.release !== undefined) return byIdsStatement(scope, ids, modelKeys);
  return {
    text: `select * from svc_records_by_ids($1::text, $2::text[], $3::text, $4::text, $5::text, $6::text[])`,
    params: [
      scope.projectId,
      [...ids],
      scope.stage,
      scope.locale,
      scope.defaultLocale,
      modelKeys ? [...modelKeys] : null,
    ],
  };
}

export interface OneSelector {
  id?: string | null;
  naturalKey?: string | null;
  /** Lookup fields (model `lookups`) and their values. */
  lookup?: Record<string, unknown>;
}

export async function readOne(
  sql: Reader,
  scope: ReadScope,
  model: ModelDef,
  sel: OneSelector,
): Promise<ContentRow | null> {
  const p = new Params();
  const conds = [
    `c.project_id = ${p.add(scope.projectId)}`,
    `c.model_key = ${p.add(model.key)}`,
    `c.stage = ${p.add(scope.stage)}`,
  ];
  const loc = p.add(scope.locale);
  conds.push(`c.locale in (${loc}, ${p.add(scope.defaultLocale)})`);
  if (sel.id) conds.push(`c.record_id = ${p.add(sel.id)}`);
  if (sel.naturalKey) conds.push(`r.natural_key = ${p.add(sel.naturalKey)}`);
  for (const [k, v] of Object.entries(sel.lookup ?? {})) {
    if (v === undefined || v === null) continue;
    conds.push(`c.data @> ${p.add(JSON.stringify({ [k]: v }))}::jsonb and (c.data->>${literalKey(k)}) is not null`);
  }
  const text = `select ${COLS} from ${contentSource(p, scope)} c join records r on r.id = c.record_id
    where ${conds.join(' and ')}${rowsSql(p, scope, model.key)} order by (c.locale = ${loc}) desc, c.record_id limit 1`;
  const [row] = await run<ContentRow>(sql, text, p.values);
  return row ?? null;
}

export interface ListArgs {
  first: number;
  after?: string | null;
  where?: Record<string, unknown> | null;
  orderBy?: { field: string; direction?: string }[] | null;
  withTotal: boolean;
  /**
   * False when the document selects no column of `records` (natural key, timestamps, draft
   * flag): the page is then read from `record_content` alone, without the join.
   */
  withRecord?: boolean;
}

export interface ListRow extends ContentRow {
  _total?: string;
  [sortKey: string]: unknown;
}

export interface ListResult {
  rows: ListRow[];
  hasNextPage: boolean;
  totalCount: number | null;
  sortKeyCount: number;
}

/** One page of a model's records: filter, keyset cursor and (when asked) the total, in one statement. */
export async function listRecords(sql: Reader, scope: ReadScope, model: ModelDef, args: ListArgs): Promise<ListResult> {
  const { text, values, keys } = isPlain(scope, args)
    ? plainStatement(scope, model, args)
    : listStatement(scope, model, args);
  const rows = await run<ListRow>(sql, text, values);
  const hasNextPage = rows.length > args.first;
  if (hasNextPage) rows.pop();
  let totalCount: number | null = null;
  if (args.withTotal) {
    if (rows.length) totalCount = Number(rows[0]!._total);
    else {
      // An empty page still owes the total; only then a second, cheap count runs.
      const slice = (q: Params, v: string) => (args.where || keys.length ? sliceValue(q, v) : q.add(v));
      const q = new Params();
      const join = restrictsModel(scope, model.key) ? ' join records r on r.id = c.record_id' : '';
      const cnt = `select count(*)::int as n from ${contentSource(q, scope)} c${join} where ${[
        `c.project_id = ${slice(q, scope.projectId)}`,
        `c.model_key = ${slice(q, model.key)}`,
        `c.stage = ${q.add(scope.stage)}`,
        localeSql(q, scope),
        whereSql(q, model, args.where),
      ].join(' and ')}${rowsSql(q, scope, model.key)}`;
      totalCount = (await run<{ n: number }>(sql, cnt, q.values))[0]!.n;
    }
  }
  return { rows, hasNextPage, totalCount, sortKeyCount: keys.length };
}

interface ListStatement {
  text: string;
  values: unknown[];
  keys: ReturnType<typeof sortKeys>;
}

function listStatement(scope: ReadScope, model: ModelDef, args: ListArgs): ListStatement {
  const p = new Params();
  const keys = sortKeys(model, args.orderBy);
  // Filtered/sorted lists inline project and model so the per-field partial indexes match
  // (sql-builder `sliceValue`); plain lists keep one statement text for every project.
  const slice = (q: Params, v: string) => (args.where || keys.length ? sliceValue(q, v) : q.add(v));
  const base =
    [
      `c.project_id = ${slice(p, scope.projectId)}`,
      `c.model_key = ${slice(p, model.key)}`,
      `c.stage = ${p.add(scope.stage)}`,
      localeSql(p, scope),
      whereSql(p, model, args.where),
    ].join(' and ') + rowsSql(p, scope, model.key);
  const after = args.after ? afterSql(p, keys, decodeCursor(args.after)) : 'true';
  const limit = p.add(String(args.first + 1), 'text');
  const withRecord = args.withRecord !== false || restrictsModel(scope, model.key);
  const cols = withRecord ? COLS : CONTENT_COLS;
  const src = contentSource(p, scope);
  const from = withRecord ? `from ${src} c join records r on r.id = c.record_id` : `from ${src} c`;
  const text = args.withTotal
    ? `with matched as (select c.record_id from ${src} c${restrictsModel(scope, model.key) ? ' join records r on r.id = c.record_id' : ''} where ${base})
       select ${cols}${sortSelect(keys)}, (select count(*) from matched) as _total ${from}
       where ${base} and ${after} order by ${orderSql(keys)} limit (${limit})::int`
    : `select ${cols}${sortSelect(keys)} ${from} where ${base} and ${after} order by ${orderSql(keys)} limit (${limit})::int`;
  return { text, values: p.values, keys };
}

/** No filter, order, cursor, release or row rule: the usual list, whose text depends on its shape only. */
function isPlain(scope: ReadScope, args: ListArgs): boolean {
  return (
    (args.where === undefined || args.where === null) &&
    (!args.orderBy || args.orderBy.length === 0) &&
    !args.after &&
    scope.release === undefined &&
    !scope.rows
  );
}

/**
 * A plain list's statement: its text made once per shape (total or not, records join or not,
 * the default locale or another), its parameters in the order listStatement adds them. Building
 * the text (parameters, sort keys, joins) was ~1 µs of an uncached read (bench/NOTES.md, issue 31).
 */
const plainTexts = new Map<number, string>();
const NO_KEYS: ReturnType<typeof sortKeys> = [];

function plainStatement(scope: ReadScope, model: ModelDef, args: ListArgs): ListStatement {
  const sameLocale = scope.locale === scope.defaultLocale;
  const values: unknown[] = sameLocale
    ? [scope.projectId, model.key, scope.stage, scope.locale, String(args.first + 1)]
    : [scope.projectId, model.key, scope.stage, scope.locale, scope.defaultLocale, String(args.first + 1)];
  const shape = (args.withTotal ? 1 : 0) | (args.withRecord !== false ? 2 : 0) | (sameLocale ? 4 : 0);
  let text = plainTexts.get(shape);
  if (text === undefined) {
    const built = listStatement(scope, model, args);
    // The parameters above must be those the text numbers: checked once per shape.
    if (built.values.length !== values.length || built.values.some((v, i) => v !== values[i]))
      throw new Error('plain list statement: parameters out of step with listStatement');
    text = built.text;
    plainTexts.set(shape, text);
  }
  return { text, values, keys: NO_KEYS };
}

export interface SearchRow extends ContentRow {
  _rank: number;
  _total: string;
}

/**
 * Full-text search over the stored tsvector ('simple' configuration: language-neutral), ranked,
 * newest id breaking ties. `offset` is the page position carried by search cursors.
 */
export async function searchContent(
  sql: Reader,
  scope: ReadScope,
  modelKeys: readonly string[] | null,
  query: string,
  first: number,
  offset: number,
): Promise<{ rows: SearchRow[]; hasNextPage: boolean; totalCount: number }> {
  const p = new Params();
  const conds = [`c.project_id = ${p.add(scope.projectId)}`, `c.stage = ${p.add(scope.stage)}`, localeSql(p, scope)];
  if (modelKeys) conds.push(`c.model_key = any(${p.add([...modelKeys], 'text[]')})`);
  const q = p.add(query);
  conds.push(`c.search @@ websearch_to_tsquery('simple', ${q})`);
  const rows = rowsSql(p, scope);
  const text = `select ${COLS}, ts_rank(c.search, websearch_to_tsquery('simple', ${q})) as _rank, count(*) over () as _total
    from ${contentSource(p, scope)} c join records r on r.id = c.record_id
    where ${conds.join(' and ')}${rows}
    order by _rank desc, c.record_id asc limit (${p.add(String(first + 1))})::int offset (${p.add(String(offset))})::int`;
  const found = await run<SearchRow>(sql, text, p.values);
  const hasNextPage = found.length > first;
  if (hasNextPage) found.pop();
  return { rows: found, hasNextPage, totalCount: found.length ? Number(found[0]!._total) : 0 };
}

export interface VersionRow {
  id: string;
  record_id: string;
  action: string;
  locale: string | null;
  data: Record<string, unknown> | null;
  user_id: string | null;
  variant_id: string | null;
  created_at: Date;
  restored_from?: number | null;
}

/** A record's history, with its model (so callers need no second query); null if no such record. */
export async function listVersions(
  sql: Reader,
  projectId: string,
  recordId: string,
  modelKeys: readonly string[] | null,
): Promise<{ modelKey: string; versions: VersionRow[] } | null> {
  const p = new Params();
  const models = modelKeys ? ` and r.model_key = any(${p.add([...modelKeys], 'text[]')})` : '';
  const text = `select v.id::text, v.record_id, v.action, v.locale, v.data, v.user_id, v.variant_id, v.created_at, v.restored_from, r.model_key
    from records r left join record_versions v on v.record_id = r.id
    where r.project_id = ${p.add(projectId)} and r.id = ${p.add(recordId)}${models} order by v.id`;
  const rows = await run<VersionRow & { model_key: string }>(sql, text, p.values);
  if (rows.length === 0) return null;
  return { modelKey: rows[0]!.model_key, versions: rows.filter((r) => r.id !== null) };
}
