import type { ModelDef } from '../projects/types.ts';

/** 'draft' is the working version, 'published' the published one (docs/graphql.md). */
export type Stage = 'draft' | 'published';

export type RecordAction = 'created' | 'updated' | 'published' | 'unpublished' | 'deleted';

/**
 * A record as handed to GraphQL resolvers: the model's field values spread at top level next
 * to the system fields, so graphql-jit's default property resolvers serve almost every field
 * without a function call. Model fields that collide with a system name are not spread.
 */
export interface RecordNode {
  _id: string;
  _modelKey: string;
  _createdAt: Date;
  _updatedAt: Date;
  _publishedAt: Date | null;
  _hasDraft: boolean;
  naturalKey: string | null;
  content: Record<string, unknown>;
  /** Which version and locale this node shows; nested references resolve in the same. */
  _stage: Stage;
  _locale: string;
  [field: string]: unknown;
}

export const SYSTEM_FIELDS = new Set(['_id', '_modelKey', '_createdAt', '_updatedAt', '_publishedAt', '_hasDraft', 'naturalKey', 'content', '_stage', '_locale']);

/** The raw row every read query returns. */
export interface ContentRow {
  id: string;
  model_key: string;
  natural_key: string | null;
  has_draft: boolean;
  created_at: Date;
  updated_at: Date;
  published_at: Date | null;
  data: Record<string, unknown>;
}

/** Where a read looks: project, stage, requested locale and the project's default locale. */
export interface ReadScope {
  projectId: string;
  stage: Stage;
  locale: string;
  defaultLocale: string;
}

export function toNode(row: ContentRow, model: ModelDef | undefined, scope: ReadScope): RecordNode {
  const data = row.data ?? {};
  const node: RecordNode = {
    _id: row.id,
    _modelKey: row.model_key,
    _createdAt: row.created_at,
    _updatedAt: row.updated_at,
    _publishedAt: row.published_at,
    _hasDraft: row.has_draft,
    naturalKey: row.natural_key,
    content: data,
    _stage: scope.stage,
    _locale: scope.locale,
  };
  if (model) {
    for (const f of model.fields) {
      if (SYSTEM_FIELDS.has(f.key)) continue;
      let v = data[f.key];
      // Enum defaults apply on read too, so records written before a default existed show it.
      if (v === undefined && f.type === 'enum' && f.config?.default !== undefined) v = f.config.default;
      node[f.key] = v ?? null;
    }
  }
  return node;
}
