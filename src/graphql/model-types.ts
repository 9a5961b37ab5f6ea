import {
  GraphQLBoolean,
  GraphQLID,
  GraphQLInt,
  GraphQLInterfaceType,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigMap,
  type GraphQLOutputType,
} from 'graphql';
import type { FieldDef, FieldType, ModelDef, Principal } from '../projects/types.ts';
import { SYSTEM_FIELDS, type RecordNode } from '../content/types.ts';
import { DateTimeScalar, JSONScalar } from './scalars.ts';
import { GRAPHQL_NAME, typeName, type GqlContext } from './context.ts';
import {
  canRead,
  customerMayRead,
  customerReadable,
  hiddenFields,
  hiddenFor,
  maskContent,
} from '../content/field-access.ts';
import { ASSETS } from './fields/files-record-fields.ts';
import { Block, list, nn, PageInfo, scalarFor, TypeCache } from './model-shapes.ts';
import { InputTypes } from './model-inputs.ts';

/**
 * Builds the GraphQL types of one schema (one project schema version, one key restriction):
 * record object types with their resolvers (links through the loader, field access rules), the
 * Record interface and connections; `inputs` builds the input, where and order-by types
 * (model-inputs.ts). Types are made once per name and reused (model-shapes.ts `TypeCache`), so
 * cyclic references between models work through field thunks.
 */

/** `_context` of a record (spec "Record system fields": `context.authStatus`; issue 12 item 5). */
const RecordContext = new GraphQLObjectType({
  name: 'RecordContext',
  description: 'The targeting context this record was read with, and the variant it chose.',
  fields: {
    authStatus: {
      type: nn(GraphQLString),
      description: '"" for an anonymous read, "authenticated" with a customer token.',
    },
    segments: { type: nn(list(GraphQLString)), description: "Keys of the customer's segments." },
    variantId: {
      type: nn(GraphQLString),
      description: 'The variant shown: "default" or the id of the first variant whose rules hold.',
    },
  },
});
const contextOf = (n: RecordNode) => ({
  authStatus: n._targeting.authStatus,
  segments: n._targeting.segments,
  variantId: n._variantId,
});

export class TypeFactory {
  readonly #cache = new TypeCache();
  readonly recordInterface: GraphQLInterfaceType;
  readonly recordConnection: GraphQLObjectType;
  /** The input, where and order-by types of this schema (they share its enum types). */
  readonly inputs: InputTypes;

  constructor(
    readonly visible: ReadonlyMap<string, ModelDef>,
    readonly all: ReadonlyMap<string, ModelDef>,
    readonly drafts: boolean,
    /** Who reads through this schema: fields whose `access.read` excludes them resolve to null. Null: no restriction. */
    readonly readers: ReadonlySet<Principal> | null = null,
  ) {
    this.recordInterface = new GraphQLInterfaceType({
      name: 'Record',
      description: 'Fields every record has.',
      fields: () => this.systemFields(),
      resolveType: (n: RecordNode) => typeName(n._modelKey),
    });
    this.recordConnection = this.connection('Record', this.recordInterface);
    this.inputs = new InputTypes(this.#cache, all, (f) => this.readable(f));
  }

  systemFields(): GraphQLFieldConfigMap<RecordNode, GqlContext> {
    const f: GraphQLFieldConfigMap<RecordNode, GqlContext> = {
      _id: { type: nn(GraphQLID) },
      _modelKey: { type: nn(GraphQLString) },
      _createdAt: { type: nn(DateTimeScalar) },
      _updatedAt: { type: nn(DateTimeScalar) },
      _publishedAt: { type: DateTimeScalar },
      naturalKey: { type: GraphQLString },
      content: { type: JSONScalar, description: 'The record content as stored, in the selected locale and variant.' },
      _context: { type: nn(RecordContext), resolve: contextOf },
    };
    // Only keys holding drafts:read see this field at all (spec: Record system fields).
    if (this.drafts)
      f._hasDraft = { type: nn(GraphQLBoolean), description: 'Whether the working version has unpublished changes.' };
    return f;
  }

  connection(name: string, node: GraphQLOutputType): GraphQLObjectType {
    return this.#cache.once(`${name}Connection`, () => {
      const edge = new GraphQLObjectType({
        name: `${name}Edge`,
        fields: { cursor: { type: nn(GraphQLString) }, node: { type: nn(node) } },
      });
      return new GraphQLObjectType({
        name: `${name}Connection`,
        fields: {
          edges: { type: nn(list(edge)) },
          pageInfo: { type: nn(PageInfo) },
          totalCount: { type: nn(GraphQLInt) },
        },
      });
    });
  }

  recordType(model: ModelDef): GraphQLObjectType {
    const name = typeName(model.key);
    return this.#cache.once(
      name,
      () =>
        new GraphQLObjectType({
          name,
          description: model.name,
          interfaces: [this.recordInterface],
          fields: () => {
            const fields = this.systemFields();
            for (const f of model.fields) {
              if (SYSTEM_FIELDS.has(f.key) || !GRAPHQL_NAME.test(f.key)) continue;
              const cfg = this.outField(name, f);
              if (cfg) fields[f.key] = cfg;
            }
            // `content` carries the stored values too: unreadable ones are left out of it.
            const readers = this.readers;
            const hidden = readers ? hiddenFields(model, readers) : [];
            if (readers && hidden.length) {
              // Fields a customer may read on their own records (`self`) or with a token (`scoped`) are decided per record.
              const perRecord = model.fields.some((f) => customerReadable(f, readers));
              fields.content = perRecord
                ? {
                    ...fields.content!,
                    resolve: (n: RecordNode, _a, ctx: GqlContext) =>
                      maskContent(n.content, ctx.customer ? hiddenFor(model, readers, ctx, n._owner) : hidden),
                  }
                : { ...fields.content!, resolve: (n: RecordNode) => maskContent(n.content, hidden) };
            }
            return fields;
          },
        }),
    );
  }

  #target(f: FieldDef): ModelDef | undefined {
    const key = f.config?.optionModelKey ?? f.config?.modelKey;
    return key ? this.visible.get(key) : undefined;
  }

  #inline(f: FieldDef): ModelDef | undefined {
    const key = f.config?.modelKey;
    return key ? this.all.get(key) : undefined;
  }

  inlineType(model: ModelDef): GraphQLObjectType {
    const name = `${typeName(model.key)}Inline`;
    return this.#cache.once(
      name,
      () =>
        new GraphQLObjectType({
          name,
          fields: () => {
            const fields: GraphQLFieldConfigMap<unknown, GqlContext> = {};
            for (const f of model.fields) {
              if (!GRAPHQL_NAME.test(f.key)) continue;
              const cfg = this.outField(name, f);
              if (cfg) fields[f.key] = cfg;
            }
            if (Object.keys(fields).length === 0) fields._empty = { type: GraphQLBoolean };
            return fields;
          },
        }),
    );
  }

  /** True when this schema's readers may read the field (`access.read`). */
  readable(f: FieldDef): boolean {
    return !this.readers || canRead(f, this.readers);
  }

  /** The output field of one model field; an unreadable field keeps its type and resolves to null. */
  outField(owner: string, f: FieldDef): GraphQLFieldConfig<any, GqlContext> | undefined {
    const cfg = this.#outField(owner, f);
    if (!cfg || this.readable(f)) return cfg;
    if (this.readers && customerReadable(f, this.readers)) {
      const inner = cfg.resolve;
      return {
        type: cfg.type,
        description: "Readable with a customer token (field access rules: self = the record's owner).",
        resolve: (n, a, ctx, info) =>
          customerMayRead(f, ctx, (n as RecordNode)._owner)
            ? inner
              ? inner(n, a, ctx, info)
              : (n as RecordNode)[f.key]
            : null,
      };
    }
    return { type: cfg.type, description: 'Not readable with this key (field access rules).', resolve: () => null };
  }

  /** Scalars read the node's property; links resolve through the loader. */
  #outField(owner: string, f: FieldDef): GraphQLFieldConfig<any, GqlContext> | undefined {
    const key = f.key;
    const multiple = f.config?.multiple === true;
    switch (f.type) {
      case 'enum': {
        const e = this.#cache.enumType(owner, f);
        return { type: multiple ? list(e) : e };
      }
      case 'select':
      case 'reference': {
        const target = this.#target(f);
        const anyRecord = f.type === 'reference' && !f.config?.optionModelKey && !f.config?.modelKey;
        const type = target ? this.recordType(target) : anyRecord ? this.recordInterface : undefined;
        // A link to a model this key cannot see is pruned with that model.
        if (!type) return undefined;
        if (multiple) {
          return {
            type: list(type),
            resolve: async (n: RecordNode, _a, ctx) => {
              const ids = n[key];
              if (!Array.isArray(ids)) return [];
              const nodes = await Promise.all(
                ids.map((id) => ctx.loader.load(String(id), n._stage, n._locale, n._targeting, n._release)),
              );
              return nodes.filter((x) => x !== null);
            },
          };
        }
        return {
          type,
          resolve: (n: RecordNode, _a, ctx) =>
            typeof n[key] === 'string'
              ? ctx.loader.load(n[key] as string, n._stage, n._locale, n._targeting, n._release)
              : null,
        };
      }
      case 'model': {
        const inline = this.#inline(f);
        return { type: inline ? this.inlineType(inline) : JSONScalar };
      }
      case 'image':
      case 'video':
      case 'file':
        return { type: ASSETS[f.type].out };
      case 'flexible':
        return { type: list(Block) };
      case 'list': {
        const item = f.itemType ?? (f.config?.itemType as FieldType | undefined) ?? 'json';
        if (item === 'reference' || item === 'select') {
          const target = this.#target(f);
          const type = target ? this.recordType(target) : this.recordInterface;
          return {
            type: list(type),
            resolve: async (n: RecordNode, _a, ctx) => {
              const ids = n[key];
              if (!Array.isArray(ids)) return [];
              return (
                await Promise.all(
                  ids.map((id) => ctx.loader.load(String(id), n._stage, n._locale, n._targeting, n._release)),
                )
              ).filter((x) => x !== null);
            },
          };
        }
        if (item === 'image' || item === 'video' || item === 'file') return { type: list(ASSETS[item].out) };
        return { type: list(item === 'text' ? GraphQLString : scalarFor(item)) };
      }
      default:
        return { type: scalarFor(f.type) };
    }
  }
}
