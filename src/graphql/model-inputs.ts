import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLString,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
} from 'graphql';
import type { FieldDef, FieldType, ModelDef } from '../projects/types.ts';
import { SYSTEM_FIELDS } from '../content/types.ts';
import { DateTimeScalar, JSONScalar } from './scalars.ts';
import { GRAPHQL_NAME, typeName } from './context.ts';
import { BlockInput, list, nn, scalarFor, SortDirection, type TypeCache } from './model-shapes.ts';
import { ASSETS } from './fields/files-record-fields.ts';

/**
 * The input types of one schema: a model's data input (`<Type>Input`, inline models as
 * `<Type>InlineInput`), its filter (`<Type>Where`), its sort (`<Type>OrderBy`) and the lookup
 * arguments of its single read. What a reader may not read (`access.read`) is neither
 * filterable, sortable nor a lookup: filtering on it would reveal its values.
 */
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

export class InputTypes {
  constructor(
    private readonly cache: TypeCache,
    /** Every model of the schema version: inline (`model`) fields may name one the key cannot list. */
    private readonly all: ReadonlyMap<string, ModelDef>,
    /** Whether this schema's readers may read the field (`TypeFactory.readable`). */
    private readonly readable: (f: FieldDef) => boolean,
  ) {}

  inputType(model: ModelDef, suffix = 'Input'): GraphQLInputObjectType {
    const name = `${typeName(model.key)}${suffix}`;
    return this.cache.once(
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
        return multiple ? list(this.cache.enumType(owner, f)) : this.cache.enumType(owner, f);
      case 'select':
      case 'reference':
        return multiple ? list(GraphQLID) : GraphQLID;
      case 'model': {
        const key = f.config?.modelKey;
        const inline = key ? this.all.get(key) : undefined;
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
    return this.cache.once(name, () => {
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
        const e: GraphQLEnumType = this.cache.enumType(owner, f);
        return this.cache.once(`${e.name}${multiple ? 'List' : ''}Filter`, () =>
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
    return this.cache.once(`${owner}OrderBy`, () => {
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
        args.set(k, f.type === 'enum' ? this.cache.enumType(typeName(model.key), f) : scalarFor(f.type));
      }
    }
    return args;
  }
}
