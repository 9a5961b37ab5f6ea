import { BadUserInput } from '../errors.ts';
import type { FieldDef, ModelDef } from '../projects/types.ts';
import type { ReadScope } from './types.ts';

/**
 * Builds the dynamic parts of list queries (filters, sort, keyset cursor) as SQL text with
 * numbered parameters. Field keys are embedded as quoted literals only after checking they are
 * plain identifiers; every value is a parameter, cast from text so postgres.js never guesses.
 */
export class Params {
  readonly values: unknown[] = [];
  add(v: unknown, cast = 'text'): string {
    this.values.push(v);
    return `$${this.values.length}::${cast}`;
  }
}

const KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function literalKey(key: string): string {
  if (!KEY_RE.test(key)) throw new BadUserInput(`Field key "${key}" cannot be queried`);
  return `'${key}'`;
}

type Kind = 'text' | 'numeric' | 'boolean' | 'array';

function kindOf(f: FieldDef): Kind {
  if (f.type === 'list' || ((f.type === 'enum' || f.type === 'select') && f.config?.multiple)) return 'array';
  if (f.type === 'number') return 'numeric';
  if (f.type === 'boolean') return 'boolean';
  return 'text';
}

/**
 * The SQL expression of a field's value, typed so comparisons and sorts are numeric/boolean-aware
 * (dates stay ISO-8601 UTC text: text order is time order, and a text->timestamptz cast is not
 * immutable, so it could not be indexed). The ONE source of this expression: filters and sorts
 * use it with `table` 'c', and the per-field expression indexes (src/content/indexes.ts) with
 * `table` null, so the planner sees identical expressions and the two cannot drift.
 */
export function fieldValueSql(f: FieldDef, table: string | null): string {
  const k = literalKey(f.key);
  const data = table ? `${table}.data` : 'data';
  const kind = kindOf(f);
  if (kind === 'numeric') return `(${data}->>${k})::numeric`;
  if (kind === 'boolean') return `(${data}->>${k})::boolean`;
  if (kind === 'array') return `(${data}->${k})`;
  return `(${data}->>${k})`;
}

export function fieldExpr(f: FieldDef): string {
  return fieldValueSql(f, 'c');
}

/** List-like fields (lists, multiple enums/selects) are served by the GIN index, not a btree. */
export function isListField(f: FieldDef): boolean {
  return kindOf(f) === 'array';
}

const SAFE_LITERAL = /^[A-Za-z0-9_.:-]{1,200}$/;

/** A string as an SQL literal when it is plainly safe to inline (ids, model keys), else null. */
export function safeLiteral(v: string): string | null {
  return SAFE_LITERAL.test(v) ? `'${v}'` : null;
}

/**
 * `project_id`/`model_key` of filtered or sorted list queries, inlined as literals: the
 * per-field indexes are partial on `project_id = '…' and model_key = '…'`, and PostgreSQL
 * proves a partial index's predicate only from constants, never from the `$n` of a generic
 * prepared plan. Anything not plainly safe stays a parameter (the query is then correct, just
 * not index-served).
 */
export function sliceValue(p: Params, v: string): string {
  return safeLiteral(v) ?? p.add(v);
}

function scalarParam(p: Params, f: FieldDef, v: unknown): string {
  const kind = kindOf(f);
  if (f.type === 'date' && typeof v === 'string' && !Number.isNaN(Date.parse(v)))
    v = new Date(Date.parse(v)).toISOString();
  const text = v === null || v === undefined ? null : String(v);
  if (kind === 'numeric') return `(${p.add(text)})::numeric`;
  if (kind === 'boolean') return `(${p.add(text)})::boolean`;
  return p.add(text);
}

function listParam(p: Params, f: FieldDef, vs: unknown[]): string {
  const kind = kindOf(f);
  const texts = vs.map((v) =>
    v === null || v === undefined
      ? null
      : f.type === 'date'
        ? new Date(Date.parse(String(v))).toISOString()
        : String(v),
  );
  const arr = p.add(texts, 'text[]');
  if (kind === 'numeric') return `(${arr})::numeric[]`;
  if (kind === 'boolean') return `(${arr})::boolean[]`;
  return arr;
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (m) => `\\${m}`);
}

function fieldFilter(p: Params, f: FieldDef, ops: Record<string, unknown>): string[] {
  const e = fieldExpr(f);
  const k = literalKey(f.key);
  const kind = kindOf(f);
  const out: string[] = [];
  for (const [op, v] of Object.entries(ops)) {
    if (v === undefined) continue;
    if (kind === 'array') {
      if (op !== 'contains') throw new BadUserInput(`Operator "${op}" is not supported on list field "${f.key}"`);
      out.push(`${e} @> ${p.add(JSON.stringify([v]), 'text')}::jsonb`);
      continue;
    }
    switch (op) {
      case 'eq':
        // Containment lets the GIN index on data answer equality on any field.
        out.push(
          v === null
            ? `${e} is null`
            : `c.data @> ${p.add(JSON.stringify({ [f.key]: f.type === 'date' ? new Date(Date.parse(String(v))).toISOString() : v }))}::jsonb`,
        );
        break;
      case 'ne':
        out.push(v === null ? `${e} is not null` : `${e} is distinct from ${scalarParam(p, f, v)}`);
        break;
      case 'in':
        out.push(`${e} = any(${listParam(p, f, (v as unknown[]) ?? [])})`);
        break;
      case 'notIn':
        out.push(`not coalesce(${e} = any(${listParam(p, f, (v as unknown[]) ?? [])}), false)`);
        break;
      case 'lt':
      case 'lte':
      case 'gt':
      case 'gte': {
        const sym = { lt: '<', lte: '<=', gt: '>', gte: '>=' }[op];
        out.push(`${e} ${sym} ${scalarParam(p, f, v)}`);
        break;
      }
      case 'contains':
        out.push(`(c.data->>${k}) ilike '%' || ${p.add(escapeLike(String(v)))} || '%'`);
        break;
      default:
        throw new BadUserInput(`Unknown operator "${op}" on field "${f.key}"`);
    }
  }
  return out;
}

/** Translates a coerced `<Model>Where` value into one SQL condition. */
export function whereSql(p: Params, model: ModelDef, where: Record<string, unknown> | null | undefined): string {
  if (!where) return 'true';
  const parts: string[] = [];
  const byKey = new Map(model.fields.filter((f) => f.queryable).map((f) => [f.key, f]));
  for (const [key, v] of Object.entries(where)) {
    if (v === undefined || v === null) continue;
    if (key === 'AND') parts.push(...(v as Record<string, unknown>[]).map((w) => `(${whereSql(p, model, w)})`));
    else if (key === 'OR') {
      const ors = (v as Record<string, unknown>[]).map((w) => `(${whereSql(p, model, w)})`);
      parts.push(ors.length ? `(${ors.join(' or ')})` : 'false');
    } else if (key === 'NOT') parts.push(`not coalesce((${whereSql(p, model, v as Record<string, unknown>)}), false)`);
    else {
      const f = byKey.get(key);
      if (!f) throw new BadUserInput(`Field "${key}" is not queryable`);
      parts.push(...fieldFilter(p, f, v as Record<string, unknown>));
    }
  }
  return parts.length ? parts.join(' and ') : 'true';
}

export interface SortKey {
  expr: string;
  desc: boolean;
  /** Cast applied to cursor values when comparing (they travel as text). */
  cast: string;
}

export function sortKeys(
  model: ModelDef,
  orderBy: { field: string; direction?: string }[] | null | undefined,
): SortKey[] {
  const keys: SortKey[] = [];
  for (const o of orderBy ?? []) {
    const f = model.fields.find((x) => x.key === o.field && x.queryable);
    if (!f) throw new BadUserInput(`Field "${o.field}" is not queryable and cannot be sorted on`);
    const kind = kindOf(f);
    if (kind === 'array') throw new BadUserInput(`List field "${f.key}" cannot be sorted on`);
    keys.push({ expr: fieldExpr(f), desc: o.direction === 'DESC', cast: kind });
  }
  return keys;
}

/**
 * ORDER BY: nulls last in both directions, record id as the unique tie-breaker. Written as
 * `nulls last` (not a leading `is null` key) so an ascending sort is exactly the order of the
 * field's index `(stage, locale, <expr>, record_id)` and needs no sort step.
 */
export function orderSql(keys: SortKey[]): string {
  return [...keys.map((k) => `${k.expr} ${k.desc ? 'desc' : 'asc'} nulls last`), 'c.record_id asc'].join(', ');
}

/** Selects each sort key as text so the cursor carries exact values (numeric, ISO dates). */
export function sortSelect(keys: SortKey[]): string {
  return keys.map((k, i) => `, (${k.expr})::text as _k${i}`).join('');
}

/**
 * The keyset condition "strictly after the cursor row" for the order of `orderSql`, so pages
 * stay stable while other rows are inserted or deleted concurrently.
 */
export function afterSql(p: Params, keys: SortKey[], cursor: unknown[]): string {
  if (cursor.length !== keys.length + 1)
    throw new BadUserInput('The cursor does not belong to this query', { field: 'after' });
  // A cursor comes back from the client: every value must be what this query's keys select
  // (text, or null), castable to the key's type, before it goes near SQL.
  keys.forEach((k, i) => {
    if (!cursorValueOk(cursor[i], k.cast)) throw new BadUserInput('Invalid cursor', { field: 'after' });
  });
  const id = cursor[keys.length];
  if (typeof id !== 'string' || !cursorValueOk(id, 'text'))
    throw new BadUserInput('Invalid cursor', { field: 'after' });
  const eqs: string[] = [];
  const ors: string[] = [];
  keys.forEach((k, i) => {
    const v = cursor[i];
    const val = v === null ? null : `(${p.add(String(v))})::${k.cast}`;
    if (val === null) {
      eqs.push(`(${k.expr}) is null`);
    } else {
      ors.push([...eqs, `((${k.expr}) is null or ${k.expr} ${k.desc ? '<' : '>'} ${val})`].join(' and '));
      eqs.push(`${k.expr} = ${val}`);
    }
  });
  ors.push([...eqs, `c.record_id > ${p.add(String(cursor[keys.length]))}`].join(' and '));
  return `(${ors.map((o) => `(${o})`).join(' or ')})`;
}

const NUMERIC_TEXT = /^-?(\d{1,131072}(\.\d{0,16383})?|\.\d{1,16383})(e[-+]?\d{1,4})?$/i;

function cursorValueOk(v: unknown, cast: string): boolean {
  if (v === null) return true;
  if (typeof v !== 'string' || v.includes('\0') || !(v as unknown as { isWellFormed(): boolean }).isWellFormed())
    return false;
  if (cast === 'numeric') return NUMERIC_TEXT.test(v) || v === 'NaN';
  if (cast === 'boolean') return v === 'true' || v === 'false';
  return true;
}

export function encodeCursor(values: unknown[]): string {
  return Buffer.from(JSON.stringify(values)).toString('base64url');
}

export function decodeCursor(cursor: string): unknown[] {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v)) return v;
  } catch {
    // fall through
  }
  throw new BadUserInput('Invalid cursor', { field: 'after' });
}

/**
 * Locale with fallback: rows of the requested locale, or of the default locale when the record
 * has no content in the requested one (docs/graphql.md).
 */
export function localeSql(p: Params, scope: ReadScope): string {
  if (scope.locale === scope.defaultLocale) return `c.locale = ${p.add(scope.locale)}`;
  const loc = p.add(scope.locale);
  return `(c.locale = ${loc} or (c.locale = ${p.add(scope.defaultLocale)} and not exists (
    select 1 from record_content l where l.record_id = c.record_id and l.stage = c.stage and l.locale = ${loc})))`;
}
