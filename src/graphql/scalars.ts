import { GraphQLScalarType, Kind, type ValueNode } from 'graphql';

/** Custom scalars shared by every generated schema (one instance per process is fine: they are stateless). */
function literal(ast: ValueNode, variables: Record<string, unknown> | null | undefined): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return ast.values.map((v) => literal(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literal(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[ast.name.value];
    default:
      return undefined;
  }
}

export const JSONScalar = new GraphQLScalarType({
  name: 'JSON',
  description: 'Any JSON value.',
  serialize: (v) => v,
  parseValue: (v) => v,
  parseLiteral: literal,
});

export const RichTextScalar = new GraphQLScalarType({
  name: 'RichText',
  description: 'Rich-text prose: an HTML/Markdown string or a structured rich-text document (JSON).',
  serialize: (v) => v,
  parseValue: (v) => v,
  parseLiteral: literal,
});

function toIso(v: unknown): string {
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'string') {
    const t = Date.parse(v);
    if (!Number.isNaN(t) && /^\d{4}-\d{2}-\d{2}/.test(v)) return new Date(t).toISOString();
  }
  throw new TypeError(`DateTime cannot represent ${JSON.stringify(v)}: expected an ISO-8601 date`);
}

export const DateTimeScalar = new GraphQLScalarType({
  name: 'DateTime',
  description:
    'An ISO-8601 date-time in UTC, for example 2024-05-01T10:00:00.000Z. Dates without a time mean midnight UTC.',
  serialize: (v) => (v instanceof Date ? v.toISOString() : v),
  parseValue: toIso,
  parseLiteral: (ast) => {
    if (ast.kind !== Kind.STRING) throw new TypeError('DateTime must be a string');
    return toIso(ast.value);
  },
});
