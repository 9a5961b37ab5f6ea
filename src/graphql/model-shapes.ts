import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLInputType,
  type GraphQLOutputType,
} from 'graphql';
import type { FieldDef, FieldType } from '../projects/types.ts';
import { DateTimeScalar, JSONScalar, RichTextScalar } from './scalars.ts';
import { GRAPHQL_NAME, typeName } from './context.ts';

/**
 * What the output types (model-types.ts) and the input types (model-inputs.ts) of one generated
 * schema share: the fixed types every schema has, the scalar a field type maps to, and the cache
 * that makes each named type once per schema (so an enum serves a record type and its filters).
 */
export const nn = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLNonNull(t);
export const list = <T extends GraphQLOutputType | GraphQLInputType>(t: T) => new GraphQLList(new GraphQLNonNull(t));

export const SortDirection = new GraphQLEnumType({
  name: 'SortDirection',
  values: { ASC: { value: 'ASC' }, DESC: { value: 'DESC' } },
});
export const PageInfo = new GraphQLObjectType({
  name: 'PageInfo',
  fields: { hasNextPage: { type: nn(GraphQLBoolean) }, endCursor: { type: GraphQLString } },
});

export const Block = new GraphQLObjectType({
  name: 'Block',
  description: 'One block of a flexible field.',
  fields: { type: { type: nn(GraphQLString) }, data: { type: JSONScalar } },
});
export const BlockInput = new GraphQLInputObjectType({
  name: 'BlockInput',
  fields: { type: { type: nn(GraphQLString) }, data: { type: JSONScalar } },
});

/** Scalar-like item types a list or lookup argument can use directly. */
export function scalarFor(t: FieldType): GraphQLInputType & GraphQLOutputType {
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

/** The named types of one schema, each made once: cyclic references between models work through field thunks. */
export class TypeCache {
  readonly #types = new Map<string, unknown>();

  once<T>(name: string, make: () => T): T {
    let t = this.#types.get(name) as T | undefined;
    if (!t) {
      t = make();
      this.#types.set(name, t);
    }
    return t;
  }

  /** `<Owner><Field>`: an enum field's values, for its output, its input and its filter alike. */
  enumType(owner: string, f: FieldDef): GraphQLEnumType {
    const name = `${owner}${typeName(f.key)}`;
    return this.once(name, () => {
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
}
