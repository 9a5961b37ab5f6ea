import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { FieldDef, ModelDef } from '../projects/types.ts';
import { SYSTEM_FIELDS } from './types.ts';
import { fieldValueSql, isListField, safeLiteral } from './sql-builder.ts';

/**
 * Per-field expression indexes (docs/graphql.md, "Indexes"). Every queryable scalar field of a
 * model gets one partial btree index on record_content:
 *
 *   create index concurrently rcq_<hash> on record_content (stage, locale, <expr>, record_id)
 *     where project_id = '<project>' and model_key = '<model>'
 *
 * `<expr>` comes from `fieldValueSql` — the function the SQL builder uses for filters and
 * sorts — so the planner sees the same expression. The predicate holds literals, and the list
 * query inlines the same literals (`sliceValue`), because a partial index is only usable when
 * its predicate is implied by constants (a generic prepared plan with `$n` never implies it).
 * Stage and locale lead the index as plain columns (equality on parameters serves them), and
 * `record_id` ends it, so `order by <expr> asc nulls last, record_id` is the index order.
 *
 * Indexes are reconciled outside any transaction after a model push (`IndexReconciler`,
 * driven by `schema.changed`), serialised per project across processes by an advisory lock,
 * idempotent: it compares what the models want with `record_field_indexes` and the catalog.
 */

/** Field types whose values are short scalars; rich, JSON-like and asset fields are not indexed. */
const INDEXED_TYPES = new Set(['text', 'number', 'boolean', 'date', 'enum', 'select', 'reference']);
/** Bound on indexes per project: each is an index on the shared table (see docs). */
export const MAX_FIELD_INDEXES_PER_PROJECT = 64;

export interface FieldIndex {
  name: string;
  modelKey: string;
  fieldKey: string;
  /** The CREATE statement, without `concurrently`/name (hashed into the name). */
  definition: string;
}

const KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function isIndexedField(f: FieldDef): boolean {
  return (
    f.queryable === true &&
    INDEXED_TYPES.has(f.type) &&
    !isListField(f) &&
    KEY_RE.test(f.key) &&
    !SYSTEM_FIELDS.has(f.key)
  );
}

/** The indexes a project's models want, in model/field order, at most MAX_FIELD_INDEXES_PER_PROJECT. */
export function desiredIndexes(projectId: string, models: readonly ModelDef[]): FieldIndex[] {
  const project = safeLiteral(projectId);
  if (!project) return [];
  const out: FieldIndex[] = [];
  for (const m of models) {
    const model = safeLiteral(m.key);
    if (!model) continue;
    for (const f of m.fields ?? []) {
      if (!isIndexedField(f) || out.length >= MAX_FIELD_INDEXES_PER_PROJECT) continue;
      const definition = `on record_content (stage, locale, (${fieldValueSql(f, null)}), record_id) where project_id = ${project} and model_key = ${model}`;
      const name = `rcq_${createHash('sha256').update(definition).digest('hex').slice(0, 40)}`;
      out.push({ name, modelKey: m.key, fieldKey: f.key, definition });
    }
  }
  return out;
}

/** Index names are `rcq_` + 40 hex: quoting-safe by construction; checked anyway. */
function ident(name: string): string {
  if (!/^rcq_[0-9a-f]{40}$/.test(name)) throw new Error(`not a field index name: ${name}`);
  return name;
}

export type ReconcileOutcome =
  | { status: 'done'; created: string[]; dropped: string[]; failed: string[] }
  | { status: 'busy' };

/**
 * Brings one project's field indexes in line with its stored models. Runs on a reserved
 * connection (session advisory lock; CONCURRENTLY cannot run in a transaction). Returns
 * `busy` when another session holds the project's lock.
 */
export async function reconcileIndexes(sql: Sql, projectId: string): Promise<ReconcileOutcome> {
  const conn = await (sql as unknown as { reserve(): Promise<Sql & { release(): void }> }).reserve();
  const lockKey = `svc:record-field-indexes:${projectId}`;
  try {
    const [lock] = await conn<{ ok: boolean }[]>`select pg_try_advisory_lock(hashtextextended(${lockKey}, 0)) as ok`;
    if (!lock?.ok) return { status: 'busy' };
    try {
      const models = await conn<
        { definition: ModelDef }[]
      >`select definition from models where project_id = ${projectId} order by position, key`;
      const want = desiredIndexes(
        projectId,
        models.map((r) => r.definition),
      );
      const tracked = await conn<
        { name: string }[]
      >`select name from record_field_indexes where project_id = ${projectId}`;
      const names = [...new Set([...want.map((w) => w.name), ...tracked.map((t) => t.name)])];
      const catalog = await conn<{ name: string; valid: boolean }[]>`
        select c.relname as name, i.indisvalid as valid
        from pg_class c join pg_index i on i.indexrelid = c.oid
        where c.relname = any(${names}::text[]) and c.relnamespace = current_schema()::regnamespace`;
      const state = new Map(catalog.map((c) => [c.name, c.valid]));
      const wanted = new Set(want.map((w) => w.name));
      const created: string[] = [];
      const dropped: string[] = [];
      const failed: string[] = [];

      for (const t of tracked) {
        if (wanted.has(t.name)) continue;
        await conn.unsafe(`drop index concurrently if exists ${ident(t.name)}`);
        await conn`delete from record_field_indexes where name = ${t.name}`;
        dropped.push(t.name);
      }
      for (const w of want) {
        const valid = state.get(w.name);
        // Intent first: a crash after this leaves a row the next run repairs.
        await conn`insert into record_field_indexes (name, project_id, model_key, field_key, definition)
                   values (${w.name}, ${projectId}, ${w.modelKey}, ${w.fieldKey}, ${w.definition}) on conflict (name) do nothing`;
        if (valid === true) continue;
        // An invalid index is the leftover of an interrupted or failed concurrent build.
        if (valid === false) await conn.unsafe(`drop index concurrently if exists ${ident(w.name)}`);
        try {
          await conn.unsafe(`create index concurrently if not exists ${ident(w.name)} ${w.definition}`);
          created.push(w.name);
        } catch (err) {
          // For example stored values that do not cast (a field whose type changed over old
          // records): the field stays queryable, just not index-served. Retried on the next push.
          console.error(
            `record field index ${w.modelKey}.${w.fieldKey} of ${projectId} not built:`,
            err instanceof Error ? err.message : err,
          );
          await conn.unsafe(`drop index concurrently if exists ${ident(w.name)}`);
          await conn`delete from record_field_indexes where name = ${w.name}`;
          failed.push(w.name);
        }
      }
      return { status: 'done', created, dropped, failed };
    } finally {
      await conn`select pg_advisory_unlock(hashtextextended(${lockKey}, 0))`;
    }
  } finally {
    conn.release();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Per process: runs `reconcileIndexes` for projects whose schema moved, one run at a time per
 * project, coalescing requests that arrive while one is queued. Every process receives every
 * `schema.changed` (the bus), so a process that finds the project's lock held by another one
 * retries a few times and then leaves it to the holder, which got the same event.
 */
export class IndexReconciler {
  readonly #tail = new Map<string, Promise<void>>();
  readonly #queued = new Map<string, Promise<void>>();
  #closed = false;

  constructor(
    private readonly sql: Sql,
    private readonly opts: { busyRetries?: number; busyDelayMs?: number } = {},
  ) {}

  /** Resolves when a reconcile that started after this call has finished (never rejects). */
  schedule(projectId: string): Promise<void> {
    if (this.#closed) return Promise.resolve();
    const queued = this.#queued.get(projectId);
    if (queued) return queued;
    const prev = this.#tail.get(projectId) ?? Promise.resolve();
    const next = prev.then(async () => {
      this.#queued.delete(projectId);
      await this.#run(projectId);
    });
    this.#queued.set(projectId, next);
    this.#tail.set(projectId, next);
    void next.finally(() => {
      if (this.#tail.get(projectId) === next) this.#tail.delete(projectId);
    });
    return next;
  }

  /** Waits for every scheduled reconcile (tests; shutdown). */
  async idle(): Promise<void> {
    while (this.#tail.size > 0) await Promise.all([...this.#tail.values()]);
  }

  /** Stops taking work and waits up to `timeoutMs` for runs in flight. */
  async close(timeoutMs = 5_000): Promise<void> {
    this.#closed = true;
    await Promise.race([this.idle(), sleep(timeoutMs)]);
  }

  async #run(projectId: string): Promise<void> {
    const retries = this.opts.busyRetries ?? 30;
    for (let attempt = 0; !this.#closed; attempt++) {
      try {
        const r = await reconcileIndexes(this.sql, projectId);
        if (r.status === 'done' || attempt >= retries) return;
      } catch (err) {
        if (!this.#closed)
          console.error(
            `record field indexes of ${projectId}: reconcile failed:`,
            err instanceof Error ? err.message : err,
          );
        return;
      }
      await sleep(this.opts.busyDelayMs ?? 2_000);
    }
  }
}
