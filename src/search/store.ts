import type { Sql } from '../store/db.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import { vectorLiteral } from './vectors.ts';

/**
 * Embeddings in PostgreSQL (docs/search.md). `embeddings.vec real[]` is always the stored
 * value. With pgvector on the server (detected at start, `SVC_VECTOR_STORE=array` turns it
 * off) a generated `vec_v vector` column and one HNSW index per dimension (cosine) serve
 * similarity; without it, exact cosine similarity is computed in SQL over the project's vectors
 * of that model (one pass per row, the stored norm saving the second).
 */
export type VectorStore = 'pgvector' | 'array';

/** Decides the store for this process; with pgvector, makes sure the column exists. */
export async function detectVectorStore(
  sql: Sql,
  setting: 'auto' | 'array',
): Promise<{ store: VectorStore; reason: string }> {
  if (setting === 'array') return { store: 'array', reason: 'SVC_VECTOR_STORE=array' };
  const [row] = await sql<
    { available: boolean }[]
  >`select exists (select 1 from pg_available_extensions where name = 'vector') as available`;
  if (!row?.available)
    return { store: 'array', reason: 'the pgvector extension is not installed on the PostgreSQL server' };
  try {
    await sql.begin(async (tx) => {
      // Processes starting together take turns; the second finds everything in place.
      await tx`select pg_advisory_xact_lock(hashtext('svc:pgvector'))`;
      await tx`create extension if not exists vector`;
      await tx.unsafe(
        'alter table embeddings add column if not exists vec_v vector generated always as (vec::vector) stored',
      );
    });
    return { store: 'pgvector', reason: 'pgvector with HNSW indexes (cosine)' };
  } catch (err) {
    return {
      store: 'array',
      reason: `pgvector is available but could not be enabled: ${(err as Error).message.slice(0, 200)}`,
    };
  }
}

/** One HNSW index per dimension in use (HNSW needs a fixed dimension); built once. */
const indexed = new Set<number>();
async function ensureIndex(sql: Sql, dims: number): Promise<void> {
  if (indexed.has(dims)) return;
  if (!Number.isInteger(dims) || dims < 1 || dims > 2000) throw new BadUserInput('bad dimension');
  await sql.unsafe(
    `create index if not exists embeddings_hnsw_${dims} on embeddings using hnsw ((vec_v::vector(${dims})) vector_cosine_ops) where dims = ${dims}`,
  );
  indexed.add(dims);
}

export interface EmbeddingTarget {
  projectId: string;
  recordId: string;
  model: string;
  /** Models the caller may see: a record of another model is not found. */
  visibleModels: readonly string[];
}

/** Stores a record's vector for a model; the model's dimension is fixed by its first vector. */
export async function upsertEmbedding(
  sql: Sql,
  store: VectorStore,
  t: EmbeddingTarget,
  vector: { values: number[]; norm: number },
): Promise<{ recordId: string; modelKey: string; model: string; dimensions: number; updatedAt: Date }> {
  const dims = vector.values.length;
  const out = await sql.begin(async (txRaw) => {
    const tx = txRaw as unknown as Sql;
    const [rec] = await tx<{ model_key: string }[]>`
      select model_key from records where project_id = ${t.projectId} and id = ${t.recordId} and model_key = any(${t.visibleModels as string[]})`;
    if (!rec) throw new NotFound(`Record ${t.recordId.slice(0, 64)} not found`);
    await tx`insert into embedding_models (project_id, model, dims) values (${t.projectId}, ${t.model}, ${dims}) on conflict (project_id, model) do nothing`;
    // A model whose vectors were all deleted may start over with another dimension.
    const [m] = await tx<{ dims: number }[]>`
      update embedding_models set dims = ${dims}
      where project_id = ${t.projectId} and model = ${t.model}
        and (dims = ${dims} or not exists (select 1 from embeddings e where e.project_id = ${t.projectId} and e.model = ${t.model}))
      returning dims`;
    if (!m) {
      const [have] = await tx<
        { dims: number }[]
      >`select dims from embedding_models where project_id = ${t.projectId} and model = ${t.model}`;
      throw new BadUserInput(
        `vector has ${dims} dimensions; embeddings of model ${t.model} in this project have ${have?.dims}`,
        { field: 'vector' },
      );
    }
    const [row] = await tx<{ updated_at: Date }[]>`
      insert into embeddings (project_id, record_id, model_key, model, dims, vec, norm)
      values (${t.projectId}, ${t.recordId}, ${rec.model_key}, ${t.model}, ${dims}, ${vector.values}::real[], ${vector.norm})
      on conflict (project_id, record_id, model) do update
        set vec = excluded.vec, norm = excluded.norm, dims = excluded.dims, model_key = excluded.model_key, updated_at = now()
      returning updated_at`;
    return {
      recordId: t.recordId,
      modelKey: rec.model_key,
      model: t.model,
      dimensions: dims,
      updatedAt: row!.updated_at,
    };
  });
  if (store === 'pgvector') await ensureIndex(sql, dims);
  return out as { recordId: string; modelKey: string; model: string; dimensions: number; updatedAt: Date };
}

/** Deletes a record's vector of one model, or of every model; answers how many went. */
export async function deleteEmbedding(
  sql: Sql,
  t: Omit<EmbeddingTarget, 'model'> & { model: string | null },
): Promise<number> {
  const rows = await sql`
    delete from embeddings where project_id = ${t.projectId} and record_id = ${t.recordId}
      and model_key = any(${t.visibleModels as string[]}) ${t.model === null ? sql`` : sql`and model = ${t.model}`}
    returning 1`;
  return rows.length;
}

/**
 * Which embedding model a query vector is compared with: the one named, or the project's only
 * model of that dimension. Null when the project has no embeddings yet.
 */
export async function modelFor(
  sql: Sql,
  projectId: string,
  dims: number,
  named: string | null,
): Promise<string | null> {
  const models = await sql<
    { model: string; dims: number }[]
  >`select model, dims from embedding_models where project_id = ${projectId} order by model`;
  if (named !== null) {
    const m = models.find((x) => x.model === named);
    if (!m) return null;
    if (m.dims !== dims)
      throw new BadUserInput(
        `vector has ${dims} dimensions; embeddings of model ${named} in this project have ${m.dims}`,
        { field: 'vector' },
      );
    return named;
  }
  if (models.length === 0) return null;
  const same = models.filter((m) => m.dims === dims);
  if (same.length === 1) return same[0]!.model;
  const list = models.map((m) => `${m.model} (${m.dims})`).join(', ');
  if (same.length === 0)
    throw new BadUserInput(`vector has ${dims} dimensions; no embedding model of this project has that many: ${list}`, {
      field: 'vector',
    });
  throw new BadUserInput(`several embedding models have ${dims} dimensions (${list}): name one with model`, {
    field: 'model',
  });
}

export interface SimilarQuery {
  projectId: string;
  model: string;
  vector: { values: number[]; norm: number };
  modelKeys: readonly string[];
  /** Only records with content in this stage (published for plain reads, draft for preview). */
  stage: 'published' | 'draft';
  limit: number;
}

export interface Hit {
  recordId: string;
  modelKey: string;
  /** Cosine similarity, -1 to 1 (1: same direction). */
  score: number;
}

/** The `limit` records most similar to the vector, best first (ties: record id). */
export async function similar(sql: Sql, store: VectorStore, q: SimilarQuery): Promise<Hit[]> {
  if (q.modelKeys.length === 0 || q.limit < 1) return [];
  const dims = q.vector.values.length;
  if (!Number.isInteger(dims) || dims < 1 || dims > 2000) throw new BadUserInput('bad dimension');
  const stageOk = sql`exists (select 1 from record_content c where c.record_id = e.record_id and c.project_id = e.project_id and c.stage = ${q.stage})`;
  let rows: { record_id: string; model_key: string; score: number }[];
  if (store === 'pgvector') {
    const lit = vectorLiteral(q.vector.values);
    // The dimension is inlined (a checked integer): the partial index's `dims = N` must be
    // provable from the query, and the ORDER BY must be the index's expression alone.
    const cast = sql.unsafe(`::vector(${dims})`);
    const sameDims = sql.unsafe(`e.dims = ${dims}`);
    rows = await sql<{ record_id: string; model_key: string; score: number }[]>`
      select e.record_id, e.model_key, 1 - (e.vec_v${cast} <=> ${lit}${cast}) as score
      from embeddings e
      where e.project_id = ${q.projectId} and e.model = ${q.model} and ${sameDims}
        and e.model_key = any(${q.modelKeys as string[]}) and ${stageOk}
      order by e.vec_v${cast} <=> ${lit}${cast}
      limit ${q.limit}`;
  } else {
    rows = await sql<{ record_id: string; model_key: string; score: number }[]>`
      select e.record_id, e.model_key,
        (select sum(a::float8 * b) from unnest(e.vec, ${q.vector.values}::float8[]) as t(a, b)) / (e.norm * ${q.vector.norm}::float8) as score
      from embeddings e
      where e.project_id = ${q.projectId} and e.model = ${q.model} and e.dims = ${dims}
        and e.model_key = any(${q.modelKeys as string[]}) and ${stageOk}
      order by score desc, e.record_id
      limit ${q.limit}`;
  }
  return rows.map((r) => ({ recordId: r.record_id, modelKey: r.model_key, score: Number(r.score) }));
}
