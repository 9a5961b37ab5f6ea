import type { ModelDef } from '../projects/types.ts';
import { ANONYMOUS, chooseVariant, DEFAULT_VARIANT, type StoredVariant, type Targeting } from './targeting.ts';

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
  /** The read's targeting context and the variant it chose (`default`: the default content). */
  _targeting: Targeting;
  _variantId: string;
  /** The customer who owns the record (null: nobody; undefined: not read). */
  _owner: string | null | undefined;
  /** The release a preview read looks through (references resolve through it too); absent otherwise. */
  _release?: string;
  [field: string]: unknown;
}

export const SYSTEM_FIELDS = new Set([
  '_id',
  '_modelKey',
  '_createdAt',
  '_updatedAt',
  '_publishedAt',
  '_hasDraft',
  'naturalKey',
  'content',
  '_stage',
  '_locale',
  '_context',
  '_targeting',
  '_variantId',
  '_owner',
  '_release',
]);

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
  /** Variants of this content row (record_content.variants), in evaluation order. */
  variants?: StoredVariant[] | null;
  /** Selected with the records join only. */
  owner_customer_id?: string | null;
}

/**
 * Rows a reader may see beyond the key's model list (model `access.read`): records of `owned`
 * models only when `viewer` owns them (no viewer: none), records of `closed` models never.
 */
export interface RowAccess {
  owned: readonly string[];
  closed: readonly string[];
  viewer: string | null;
}

/** Where a read looks: project, stage, requested locale and the project's default locale. */
export interface ReadScope {
  projectId: string;
  stage: Stage;
  locale: string;
  defaultLocale: string;
  /** Which variant each record shows (default: the anonymous context). */
  targeting?: Targeting;
  /** Owner-only and closed models for this reader (absent: no restriction). */
  rows?: RowAccess;
  /**
   * Read the site as it will be once this release is live (stage 'published' with the
   * release's versions in place; src/content/read.ts `contentSource`). Checked to be the
   * project's before a scope carries it.
   */
  release?: string;
}

export function toNode(row: ContentRow, model: ModelDef | undefined, scope: ReadScope): RecordNode {
  const t = scope.targeting ?? ANONYMOUS;
  const variant = row.variants ? chooseVariant(row.variants, t) : null;
  const data = (variant ? variant.data : row.data) ?? {};
  const node = (model ? nodeMakerOf(model) : bareNode)(row, data, scope, t, variant ? variant.id : DEFAULT_VARIANT);
  if (scope.release !== undefined) node._release = scope.release;
  return node;
}

type NodeMaker = (
  row: ContentRow,
  data: Record<string, unknown>,
  scope: ReadScope,
  t: Targeting,
  variantId: string,
) => RecordNode;

/**
 * A model's node maker: one object literal with the system properties and every field, made
 * once per model definition (as graphql-jit makes its queries), so every node of a model has one
 * shape from the start. Filled field by field (`node[key] = v`), a node of ten fields changed
 * shape ten times and grew its property storage twice (~3 % of an uncached read's server CPU;
 * bench/NOTES.md, issue 31). Field keys are names (config KEY_RE: a letter, then letters, digits
 * and _), written as JSON string literals.
 */
const nodeMakers = new WeakMap<ModelDef, NodeMaker>();
function nodeMakerOf(model: ModelDef): NodeMaker {
  let make = nodeMakers.get(model);
  if (!make) nodeMakers.set(model, (make = nodeMaker(readFieldsOf(model))));
  return make;
}

/** A node of the system properties and, after them, `fields` (none: a record of an unknown model). */
function nodeMaker(fields: readonly { key: string; fallback: unknown }[]): NodeMaker {
  // Enum defaults apply on read too, so records written before a default existed show it.
  const props = fields
    .map((f, i) => {
      const k = JSON.stringify(f.key);
      return `,\n${k}: (v = data[${k}]) === undefined ? (fb[${i}] ?? null) : (v ?? null)`;
    })
    .join('');
  return new Function(
    'fb',
    `return function node(row, data, scope, t, variantId) {
      let v;
      return {
        _id: row.id, _modelKey: row.model_key, _createdAt: row.created_at, _updatedAt: row.updated_at,
        _publishedAt: row.published_at, _hasDraft: row.has_draft, naturalKey: row.natural_key,
        content: data, _stage: scope.stage, _locale: scope.locale, _targeting: t,
        _variantId: variantId, _owner: row.owner_customer_id${props}
      };
    };`,
  )(fields.map((f) => f.fallback)) as NodeMaker;
}

const bareNode = nodeMaker([]);

/**
 * A model's fields as toNode reads them (system fields left out, an enum's default beside it),
 * made once per model definition: a page of records filtered and looked up the same list per
 * record (~0.5 µs of an uncached read of ten; bench/NOTES.md, issue 31).
 */
const readFields = new WeakMap<ModelDef, readonly { key: string; fallback: unknown }[]>();
function readFieldsOf(model: ModelDef): readonly { key: string; fallback: unknown }[] {
  let list = readFields.get(model);
  if (!list) {
    list = model.fields
      .filter((f) => !SYSTEM_FIELDS.has(f.key))
      .map((f) => ({ key: f.key, fallback: f.type === 'enum' ? f.config?.default : undefined }));
    readFields.set(model, list);
  }
  return list;
}
