import type { Sql, ContentSql } from '../store/db.ts';
import type { Reader } from '../content/db.ts';
import type { ModelDef } from '../projects/types.ts';
import { readByIds } from '../content/read.ts';
import { toNode, type ReadScope, type RecordNode, type RowAccess, type Stage } from '../content/types.ts';
import { ANONYMOUS, type Targeting } from '../content/targeting.ts';

/**
 * Per-request batching of record-by-id reads (references, selects, `record`): every id asked
 * for in the same tick with the same stage and locale is fetched in ONE query, so resolving a
 * reference field over a page of records costs one round trip, not one per record.
 */
interface Batch {
  stage: Stage;
  locale: string;
  targeting: Targeting;
  release: string | undefined;
  ids: Map<string, { resolve: (n: RecordNode | null) => void; reject: (e: unknown) => void }[]>;
}

export class RecordLoader {
  readonly #batches = new Map<string, Batch>();
  readonly #cache = new Map<string, Promise<RecordNode | null>>();

  constructor(
    private readonly sql: Sql | ContentSql,
    /** Published reads (a replica route, graphql/context.ts); drafts and releases use `sql`. */
    private readonly published: Reader,
    private readonly projectId: string,
    private readonly defaultLocale: string,
    /** Visible models: records of any other model resolve to null. */
    private readonly models: ReadonlyMap<string, ModelDef>,
    private readonly restrictTo: readonly string[] | null,
    /** Model `access.read` restrictions of the reader: linked records obey them too. */
    private readonly rows?: RowAccess,
  ) {}

  /** `targeting`: the context of the record that links (its variant choice carries over). */
  load(
    id: string,
    stage: Stage,
    locale: string,
    targeting: Targeting = ANONYMOUS,
    release?: string,
  ): Promise<RecordNode | null> {
    // A release preview (`release:`) reads through the release: its own batch and cache entries.
    const bk =
      release === undefined
        ? `${stage}\0${locale}\0${targeting.key}`
        : `${stage}\0${locale}\0${targeting.key}\0${release}`;
    const ck = `${bk}\0\0${id}`;
    const cached = this.#cache.get(ck);
    if (cached) return cached;
    let batch = this.#batches.get(bk);
    if (!batch) {
      batch = { stage, locale, targeting, release, ids: new Map() };
      this.#batches.set(bk, batch);
      const b = batch;
      queueMicrotask(() => {
        this.#batches.delete(bk);
        void this.#dispatch(b);
      });
    }
    const p = new Promise<RecordNode | null>((resolve, reject) => {
      const waiters = batch.ids.get(id) ?? [];
      waiters.push({ resolve, reject });
      batch.ids.set(id, waiters);
    });
    this.#cache.set(ck, p);
    return p;
  }

  async #dispatch(b: Batch): Promise<void> {
    const scope: ReadScope = {
      projectId: this.projectId,
      stage: b.stage,
      locale: b.locale,
      defaultLocale: this.defaultLocale,
      targeting: b.targeting,
      rows: this.rows,
    };
    if (b.release !== undefined) scope.release = b.release;
    try {
      const rows = await readByIds(
        b.stage === 'published' && b.release === undefined ? this.published : this.sql,
        scope,
        [...b.ids.keys()],
        this.restrictTo,
      );
      for (const [id, waiters] of b.ids) {
        const row = rows.get(id);
        const model = row ? this.models.get(row.model_key) : undefined;
        const node = row && model ? toNode(row, model, scope) : null;
        for (const w of waiters) w.resolve(node);
      }
    } catch (err) {
      for (const waiters of b.ids.values()) for (const w of waiters) w.reject(err);
    }
  }
}
