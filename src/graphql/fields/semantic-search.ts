import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLInterfaceType,
  type GraphQLNullableType,
} from 'graphql';
import type { KeyPrincipal } from '../../auth/principal.ts';
import { isPublicKey } from '../../auth/principal.ts';
import { requireScope as requireKeyScope } from '../../auth/scopes.ts';
import { BadUserInput } from '../../errors.ts';
import type { ModelDef } from '../../projects/types.ts';
import { readByIds, searchContent } from '../../content/read.ts';
import { encodeCursor } from '../../content/sql-builder.ts';
import type { RecordNode } from '../../content/types.ts';
import { checkModelName, checkVector } from '../../search/vectors.ts';
import { deleteEmbedding, modelFor, similar, upsertEmbedding, type Hit, type VectorStore } from '../../search/store.ts';
import type { GqlContext } from '../context.ts';
import { searchOffset } from '../argument-limits.ts';
import { node, pageSize, readerFor, requireScope, targetedScope, type Connection } from '../resolvers.ts';
import type { ReadScope } from '../../content/types.ts';
import { DateTimeScalar } from '../scalars.ts';

/**
 * Semantic search (docs/search.md): `upsertEmbedding` / `deleteEmbedding`
 * (search:semantic:write, secret keys), `similarRecords` (search:semantic:read), and the
 * `mode: SEMANTIC | HYBRID` of `search<Type>s` / `searchRecords` (search:read plus
 * search:semantic:read). Results are never put in the response cache: embeddings change
 * without a record change.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

/** Candidates one semantic or hybrid page may rank: RRF needs a pool, paging a bound. */
const MAX_CANDIDATES = 1000;
const RRF_K = 60;

function storeOf(ctx: GqlContext): VectorStore {
  return ctx.svc.vectorStore ?? 'array';
}

const Embedding = new GraphQLObjectType({
  name: 'Embedding',
  fields: {
    recordId: { type: nn(GraphQLID) },
    modelKey: { type: nn(GraphQLString), description: 'The content model of the record.' },
    model: { type: nn(GraphQLString), description: 'The embedding model that produced the vector.' },
    dimensions: { type: nn(GraphQLInt) },
    updatedAt: { type: nn(DateTimeScalar) },
  },
});

export const SearchMode = new GraphQLEnumType({
  name: 'SearchMode',
  values: {
    FULLTEXT: { description: 'Full-text search over the record content (the default).' },
    SEMANTIC: { description: 'Ranked by cosine similarity to `vector` (needs search:semantic:read).' },
    HYBRID: { description: 'Full-text and vector rankings fused (reciprocal rank fusion, k = 60).' },
  },
});

/** The arguments search fields gain. */
export const semanticSearchArgs: GraphQLFieldConfigArgumentMap = {
  mode: { type: SearchMode, description: 'FULLTEXT when omitted; SEMANTIC and HYBRID need `vector`.' },
  vector: { type: new GraphQLList(nn(GraphQLFloat)), description: 'The query embedding (SEMANTIC, HYBRID).' },
  embeddingModel: {
    type: GraphQLString,
    description: "Which embedding model's vectors to compare; default: the project's only one of that dimension.",
  },
};

let similarType: { iface: GraphQLInterfaceType; type: GraphQLObjectType } | undefined;
function similarRecord(iface: GraphQLInterfaceType): GraphQLObjectType {
  if (similarType?.iface !== iface) {
    similarType = {
      iface,
      type: new GraphQLObjectType({
        name: 'SimilarRecord',
        fields: {
          score: { type: nn(GraphQLFloat), description: 'Cosine similarity, -1 to 1.' },
          record: { type: nn(iface) },
        },
      }),
    };
  }
  return similarType.type;
}

async function target(
  ctx: GqlContext,
  vectorArg: unknown,
  modelArg: unknown,
): Promise<{ vector: { values: number[]; norm: number }; model: string | null }> {
  const vector = checkVector(vectorArg);
  const named = modelArg === undefined || modelArg === null ? null : checkModelName(modelArg);
  return { vector, model: await modelFor(ctx.svc.sql, ctx.principal.projectId, vector.values.length, named) };
}

async function nodesOf(ctx: GqlContext, ids: readonly string[], scope: ReadScope): Promise<Map<string, RecordNode>> {
  const rows = await readByIds(readerFor(ctx, scope), scope, ids, [...ctx.models.keys()]);
  const out = new Map<string, RecordNode>();
  for (const [id, row] of rows) {
    const n = node(ctx, row, scope);
    if (n) out.set(id, n);
  }
  return out;
}

export function semanticQueries(
  recordInterface: GraphQLInterfaceType | null,
): GraphQLFieldConfigMap<unknown, GqlContext> {
  if (!recordInterface) return {};
  return {
    similarRecords: {
      type: nn(new GraphQLList(nn(similarRecord(recordInterface)))),
      description:
        'Records whose embeddings are nearest to the vector by cosine similarity, best first (search:semantic:read).',
      args: {
        vector: { type: nn(new GraphQLList(nn(GraphQLFloat))) },
        modelKeys: { type: new GraphQLList(nn(GraphQLString)) },
        first: { type: GraphQLInt },
        model: {
          type: GraphQLString,
          description: "The embedding model; default: the project's only one of the vector's dimension.",
        },
        locale: { type: GraphQLString },
        preview: { type: GraphQLBoolean },
      },
      resolve: async (_r, args: Record<string, any>, ctx) => {
        ctx.noStore = true;
        requireKeyScope(ctx.principal, 'search:semantic:read');
        const first = pageSize(args.first);
        const scope = await targetedScope(ctx, args);
        const keys = visibleKeys(ctx, args.modelKeys);
        const t = await target(ctx, args.vector, args.model);
        if (!t.model || first === 0) return [];
        const hits = await similar(ctx.svc.sql, storeOf(ctx), {
          projectId: ctx.principal.projectId,
          model: t.model,
          vector: t.vector,
          modelKeys: keys,
          stage: scope.stage,
          limit: first,
        });
        const nodes = await nodesOf(
          ctx,
          hits.map((h) => h.recordId),
          scope,
        );
        return hits.flatMap((h) => (nodes.has(h.recordId) ? [{ score: h.score, record: nodes.get(h.recordId)! }] : []));
      },
    },
  };
}

function visibleKeys(ctx: GqlContext, modelKeys: unknown): string[] {
  const all = [...ctx.models.keys()];
  if (!Array.isArray(modelKeys)) return all;
  return (modelKeys as string[]).filter((k) => ctx.models.has(k));
}

export function semanticMutations(principal: KeyPrincipal): GraphQLFieldConfigMap<unknown, GqlContext> {
  if (isPublicKey(principal.kind)) return {};
  return {
    upsertEmbedding: {
      type: nn(Embedding),
      description:
        "Stores a record's vector for an embedding model (search:semantic:write). A model's first vector fixes its dimension in the project.",
      args: {
        recordId: { type: nn(GraphQLID) },
        vector: { type: nn(new GraphQLList(nn(GraphQLFloat))) },
        model: { type: nn(GraphQLString) },
      },
      resolve: (_r, a: { recordId: string; vector: number[]; model: string }, ctx) => {
        ctx.noStore = true;
        requireKeyScope(ctx.principal, 'search:semantic:write');
        const model = checkModelName(a.model);
        const vector = checkVector(a.vector);
        return upsertEmbedding(
          ctx.svc.sql,
          storeOf(ctx),
          {
            projectId: ctx.principal.projectId,
            recordId: String(a.recordId),
            model,
            visibleModels: [...ctx.models.keys()],
          },
          vector,
        );
      },
    },
    deleteEmbedding: {
      type: nn(GraphQLInt),
      description:
        "Deletes a record's vector of one embedding model, or of all of them; answers how many were deleted (search:semantic:write).",
      args: { recordId: { type: nn(GraphQLID) }, model: { type: GraphQLString } },
      resolve: (_r, a: { recordId: string; model?: string | null }, ctx) => {
        ctx.noStore = true;
        requireKeyScope(ctx.principal, 'search:semantic:write');
        const model = a.model === undefined || a.model === null ? null : checkModelName(a.model);
        return deleteEmbedding(ctx.svc.sql, {
          projectId: ctx.principal.projectId,
          recordId: String(a.recordId),
          model,
          visibleModels: [...ctx.models.keys()],
        });
      },
    },
  };
}

/** Whether a search field call asks for SEMANTIC or HYBRID (else the full-text path serves it). */
export function wantsSemantic(args: Record<string, any>): boolean {
  return args.mode === 'SEMANTIC' || args.mode === 'HYBRID';
}

/**
 * `search<Type>s` / `searchRecords` with `mode: SEMANTIC | HYBRID`. SEMANTIC ranks by cosine
 * similarity (the query text may be empty); HYBRID fuses the full-text ranking and the vector
 * ranking of up to 1,000 candidates each with reciprocal rank fusion (score Σ 1/(60 + rank));
 * only records with a positive cosine similarity take part in the vector ranking.
 */
export async function semanticSearchConnection(
  ctx: GqlContext,
  models: readonly ModelDef[],
  args: Record<string, any>,
): Promise<Connection> {
  ctx.noStore = true;
  requireScope(ctx, 'search:read');
  requireKeyScope(ctx.principal, 'search:semantic:read');
  if (args.vector === undefined || args.vector === null)
    throw new BadUserInput(`mode ${args.mode} needs a vector`, { field: 'vector' });
  const query = String(args.query ?? '').trim();
  if (query.length > 500 || (args.mode === 'HYBRID' && query.length === 0))
    throw new BadUserInput(
      args.mode === 'HYBRID' ? 'query must be 1 to 500 characters' : 'query must be at most 500 characters',
      { field: 'query' },
    );
  const scope = await targetedScope(ctx, args);
  const first = pageSize(args.first);
  const offset = searchOffset(args.after);
  const t = await target(ctx, args.vector, args.embeddingModel);
  const keys = models.map((m) => m.key);
  const pool = Math.min(MAX_CANDIDATES, Math.max(100, offset + first + 1));
  const semantic: Hit[] = t.model
    ? await similar(ctx.svc.sql, storeOf(ctx), {
        projectId: ctx.principal.projectId,
        model: t.model,
        vector: t.vector,
        modelKeys: keys,
        stage: scope.stage,
        limit: pool,
      })
    : [];
  let ranked: string[];
  if (args.mode === 'SEMANTIC') ranked = semantic.map((h) => h.recordId);
  else {
    const text = await searchContent(readerFor(ctx, scope), scope, keys, query, pool, 0);
    const fused = new Map<string, number>();
    // Only vectors pointing the query's way are evidence: a record at or past 90° gets no vector rank.
    for (const [i, h] of semantic.filter((h) => h.score > 0).entries())
      fused.set(h.recordId, (fused.get(h.recordId) ?? 0) + 1 / (RRF_K + i + 1));
    for (const [i, r] of text.rows.entries()) fused.set(r.id, (fused.get(r.id) ?? 0) + 1 / (RRF_K + i + 1));
    ranked = [...fused].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([id]) => id);
  }
  const page = ranked.slice(offset, offset + first);
  const nodes = await nodesOf(ctx, page, scope);
  const edges = page.flatMap((id, i) =>
    nodes.has(id) ? [{ cursor: encodeCursor(['s', offset + i + 1]), node: nodes.get(id)! }] : [],
  );
  return {
    edges,
    pageInfo: { hasNextPage: ranked.length > offset + first, endCursor: edges.at(-1)?.cursor ?? null },
    totalCount: ranked.length,
  };
}
