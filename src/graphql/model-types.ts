import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLInterfaceType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigMap,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
  type GraphQLOutputType,
} from 'graphql';
import type { FieldDef, FieldType, ModelDef, Principal } from '../projects/types.ts';
import { SYSTEM_FIELDS, type RecordNode } from '../content/types.ts';
import { DateTimeScalar, JSONScalar, RichTextScalar } from './scalars.ts';
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

/**
 * Builds the GraphQL types of one schema (one project schema version, one key restriction):
 * record object types, inputs, where and order-by inputs. Types are made once per name and
 * reused, so cyclic references between models work through field thunks.
 */
const nn = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLNonNull(t);
const list = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLList(new GraphQLNonNull(t));

export const SortDirection = new GraphQLEnumType({
  name: 'SortDirection',
  values: { ASC: { value: 'ASC' }, DESC: { value: 'DESC' } },
});
export const PageInfo = new GraphQLObjectType({
  name: 'PageInfo',
  fields: { hasNextPage: { type: nn(GraphQLBoolean) }, endCursor: { type: GraphQLString } },
});

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

const Block = new GraphQLObjectType({
  name: 'Block',
  description: 'One block of a flexible field.',
  fields: { type: { type: nn(GraphQLString) }, data: { type: JSONScalar } },
});
const BlockInput = new GraphQLInputObjectType({
  name: 'BlockInput',
  fields: { type: { type: nn(GraphQLString) }, data: { type: JSONScalar } },
});

function filterType(name: string, t: GraphQLInputType, ops: string[]): GraphQLInputObjectType {
  const fields: GraphQLInputFieldConfigMap = {};
  for (const op of ops) fields[op] = { type: op === 'in' || op === 'notIn' ? list(t as never) : t };
  return new GraphQLInputObjectType({ name, fields });
}
const ORDERED = ['eq', 'ne', 'in', 'notIn', 'lt', 'lte', 'gt', 'gte'];
const FILTERS = {
  String: filterType('StringFilter', GraphQLString, [...ORDERED, 'contains']),
  Float: filterType('FloatFilter', GraphQLFloat, ORDERED),
  Boolean: filterType('BooleanFilter', GraphQLBoolean, ['eq', 'ne']),
  DateTime: filterType('DateTimeFilter', DateTimeScalar, ORDERED),
  ID: filterType('IDFilter', GraphQLID, ['eq', 'ne', 'in', 'notIn']),
  StringList: filterType('StringListFilter', GraphQLString, ['contains']),
  FloatList: filterType('FloatListFilter', GraphQLFloat, ['contains']),
};

/** Scalar-like item types a list or lookup argument can use directly. */
function scalarFor(t: FieldType): GraphQLInputType & GraphQLOutputType {
  switch (t) {
    case 'number':
      return GraphQLFloat;
    case 'boolean':
      return GraphQLBoolean;
    case 'date':
      return DateTimeScalar;
    case 'richtext':
      return RichTextScalar;
    case 'json':
    case 'model':
    case 'flexible':
    case 'list':
      return JSONScalar;
    case 'select':
    case 'reference':
      return GraphQLID;
    default:
      return GraphQLString;
  }
}

export class TypeFactory {
  readonly #types = new Map<string, unknown>();
  readonly recordInterface: GraphQLInterfaceType;
  readonly recordConnection: GraphQLObjectType;

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
  }

  #once<T>(name: string, make: () => T): T {
    let t = this.#types.get(name) as T | undefined;
    if (!t) {
      t = make();
      this.#types.set(name, t);
    }
    return t;
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
    return this.#once(`${name}Connection`, () => {
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
    return this.#once(
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

  enumType(owner: string, f: FieldDef): GraphQLEnumType {
    const name = `${owner}${typeName(f.key)}`;
    return this.#once(name, () => {
      const values: Record<string, { value: string; description?: string }> = {};
      for (const o of f.config?.options ?? []) {
        let n =
          GRAPHQL_NAME.test(o.value) && !['true', 'false', 'null'].includes(o.value)
            ? o.value
            : o.value
                .toUpperCase()
                .replace(/[^A-Z0-9_]/g, '_')
                .replace(/^(?=\d)/, '_');
        while (values[n]) n += '_';
        values[n] = { value: o.value, description: o.label };
      }
      if (Object.keys(values).length === 0) values.NONE = { value: '' };
      const d = f.config?.default;
      return new GraphQLEnumType({ name, values, description: d === undefined ? undefined : `Default: ${String(d)}` });
    });
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
    return this.#once(
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
        const e = this.enumType(owner, f);
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

  inputType(model: ModelDef, suffix = 'Input'): GraphQLInputObjectType {
    const name = `${typeName(model.key)}${suffix}`;
    return this.#once(
      name,
      () =>
        new GraphQLInputObjectType({
          name,
          fields: () => {
            const fields: GraphQLInputFieldConfigMap = {};
            for (const f of model.fields) {
              if (SYSTEM_FIELDS.has(f.key) || !GRAPHQL_NAME.test(f.key)) continue;
              fields[f.key] = {
                type: this.inField(typeName(model.key), f),
                description: f.required ? 'Required.' : undefined,
              };
            }
            if (Object.keys(fields).length === 0) fields._empty = { type: GraphQLBoolean };
            return fields;
          },
        }),
    );
  }

  inField(owner: string, f: FieldDef): GraphQLInputType {
    const multiple = f.config?.multiple === true;
    switch (f.type) {
      case 'enum':
        return multiple ? list(this.enumType(owner, f)) : this.enumType(owner, f);
      case 'select':
      case 'reference':
        return multiple ? list(GraphQLID) : GraphQLID;
      case 'model': {
        const inline = this.#inline(f);
        return inline ? this.inputType(inline, 'InlineInput') : JSONScalar;
      }
      case 'image':
      case 'video':
      case 'file':
        return ASSETS[f.type].inp;
      case 'flexible':
        return list(BlockInput);
      case 'list': {
        const item = f.itemType ?? (f.config?.itemType as FieldType | undefined) ?? 'json';
        if (item === 'image' || item === 'video' || item === 'file') return list(ASSETS[item].inp);
        return list(scalarFor(item));
      }
      default:
        return scalarFor(f.type);
    }
  }

  /** `<Type>Where`, or undefined when the model has no queryable field. */
  whereType(model: ModelDef): GraphQLInputObjectType | undefined {
    // Filtering on a field the reader cannot read would reveal its values: not offered.
    const q = model.fields.filter(
      (f) => f.queryable && GRAPHQL_NAME.test(f.key) && !SYSTEM_FIELDS.has(f.key) && this.readable(f),
    );
    if (q.length === 0) return undefined;
    const owner = typeName(model.key);
    const name = `${owner}Where`;
    return this.#once(name, () => {
      const self: GraphQLInputObjectType = new GraphQLInputObjectType({
        name,
        fields: () => {
          const fields: GraphQLInputFieldConfigMap = {
            AND: { type: list(self) },
            OR: { type: list(self) },
            NOT: { type: self },
          };
          for (const f of q) fields[f.key] = { type: this.#filterFor(owner, f) };
          return fields;
        },
      });
      return self;
    });
  }

  #filterFor(owner: string, f: FieldDef): GraphQLInputObjectType {
    const multiple = f.config?.multiple === true;
    switch (f.type) {
      case 'number':
        return FILTERS.Float;
      case 'boolean':
        return FILTERS.Boolean;
      case 'date':
        return FILTERS.DateTime;
      case 'select':
      case 'reference':
        return multiple ? FILTERS.StringList : FILTERS.ID;
      case 'enum': {
        const e = this.enumType(owner, f);
        return this.#once(`${e.name}${multiple ? 'List' : ''}Filter`, () =>
          filterType(
            `${e.name}${multiple ? 'List' : ''}Filter`,
            e,
            multiple ? ['contains'] : ['eq', 'ne', 'in', 'notIn'],
          ),
        );
      }
      case 'list': {
        const item = f.itemType ?? 'json';
        return item === 'number' ? FILTERS.FloatList : FILTERS.StringList;
      }
      default:
        return FILTERS.String;
    }
  }

  orderByType(model: ModelDef): GraphQLInputObjectType | undefined {
    const q = model.fields.filter(
      (f) =>
        f.queryable &&
        GRAPHQL_NAME.test(f.key) &&
        !SYSTEM_FIELDS.has(f.key) &&
        f.type !== 'list' &&
        !f.config?.multiple &&
        this.readable(f),
    );
    if (q.length === 0) return undefined;
    const owner = typeName(model.key);
    return this.#once(`${owner}OrderBy`, () => {
      const sortField = new GraphQLEnumType({
        name: `${owner}SortField`,
        values: Object.fromEntries(q.map((f) => [f.key, { value: f.key }])),
      });
      return new GraphQLInputObjectType({
        name: `${owner}OrderBy`,
        fields: { field: { type: nn(sortField) }, direction: { type: SortDirection, defaultValue: 'ASC' } },
      });
    });
  }

  /** Lookup arguments of the single read: one per field named in a `lookups[].keyBy`. */
  lookupArgs(model: ModelDef): Map<string, GraphQLInputType> {
    const args = new Map<string, GraphQLInputType>();
    for (const l of model.lookups ?? []) {
      for (const k of l.keyBy) {
        const f = model.fields.find((x) => x.key === k);
        if (
          !f ||
          SYSTEM_FIELDS.has(k) ||
          ['locale', 'preview'].includes(k) ||
          !GRAPHQL_NAME.test(k) ||
          !this.readable(f)
        )
          continue;
        args.set(k, f.type === 'enum' ? this.enumType(typeName(model.key), f) : scalarFor(f.type));
      }
    }
    return args;
  }
}
