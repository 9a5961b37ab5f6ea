import {
  isEnumType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  Kind,
  type ExecutionResult,
  type FieldNode,
  type GraphQLField,
  type GraphQLLeafType,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLResolveInfo,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import { getArgumentDefs } from 'graphql-jit/dist/ast';

/**
 * Plans of plain queries: one root field whose resolver is called as graphql-jit calls it, and a
 * selection below it that only reads properties (no resolver, argument, directive, fragment,
 * alias clash or abstract type) of objects, lists and leaves. Such a document — the usual list
 * or item read, trusted or not — is answered by walking the resolver's value along the plan:
 * the same property reads, the same scalar serializers, the same key order, so the same JSON as
 * the compiled query's, without the compiled query's per-leaf work (an error path and a path
 * array built for every leaf: ~190 allocations for a page of ten records). An uncached read of
 * ten records spent ~21 µs in graphql-jit and its JSON, ~11 µs walking the plan (Bun 1.4, this
 * box; bench/NOTES.md, issue 31).
 *
 * Anything off the plain path — a null where the type says non-null, an Error value, a value
 * that is not an array where a list is expected, a promise below the root, a serializer that
 * throws or returns nothing, a resolver that throws — makes the walk give up, and the compiled
 * query runs instead: it produces the error, the path and the partial data the spec asks for.
 * Queries only (reads run twice at worst, on that rare path); documents with variables are
 * left to graphql-jit (its variable coercion is not duplicated here).
 */
export interface Plan {
  /** The root field's response key. */
  key: string;
  resolve: NonNullable<GraphQLField<unknown, unknown>['resolve']>;
  /** The arguments as graphql-jit embeds them: JSON of the coerced literals, parsed per call. */
  args: string;
  info: GraphQLResolveInfo;
  complete: Complete;
}

/** A completed value, or MISS: give up, the compiled query answers. */
type Complete = (value: unknown) => unknown;
const MISS: unique symbol = Symbol('plan miss');

/** The plan of an operation, or null when it is not plain. */
export function planOf(schema: GraphQLSchema, op: OperationDefinitionNode): Plan | null {
  if (op.operation !== 'query' || op.variableDefinitions?.length || op.directives?.length) return null;
  const root = schema.getQueryType();
  const selections = op.selectionSet.selections;
  if (!root || selections.length !== 1 || selections[0]!.kind !== Kind.FIELD) return null;
  const node = selections[0] as FieldNode;
  if (node.directives?.length || node.name.value.startsWith('__')) return null;
  const field = root.getFields()[node.name.value];
  if (!field?.resolve) return null;
  let args: string;
  try {
    const defs = getArgumentDefs(field, node);
    // graphql-jit writes the values into its code (NaN, dates and all): plain JSON is parsed
    // back to the same values, anything else is left to it.
    if (defs.missing.length || !plainJson(defs.values, 0)) return null;
    args = JSON.stringify(defs.values);
  } catch {
    return null;
  }
  const complete = completer(field.type, node.selectionSet);
  if (!complete) return null;
  const info = {
    fieldName: field.name,
    fieldNodes: [node],
    returnType: field.type,
    parentType: root,
    path: { key: node.alias?.value ?? node.name.value, prev: undefined },
    schema,
    fragments: {},
    rootValue: undefined,
    operation: op,
    variableValues: {},
  } as unknown as GraphQLResolveInfo;
  return { key: node.alias?.value ?? node.name.value, resolve: field.resolve, args, info, complete };
}

/** Strings, finite numbers, booleans, null, arrays and plain objects of those, not too deep. */
function plainJson(v: unknown, depth: number): boolean {
  if (depth > 32) return false;
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (Array.isArray(v)) return v.every((x) => plainJson(x, depth + 1));
  if (typeof v !== 'object' || Object.getPrototypeOf(v) !== Object.prototype) return false;
  return Object.values(v as Record<string, unknown>).every((x) => plainJson(x, depth + 1));
}

function completer(type: GraphQLOutputType, selection: SelectionSetNode | undefined): Complete | null {
  if (isNonNullType(type)) {
    const inner = completer(type.ofType, selection);
    return inner && ((v) => (v === null || v === undefined ? MISS : inner(v)));
  }
  if (isListType(type)) {
    const item = completer(type.ofType, selection);
    if (!item) return null;
    return (v) => {
      if (v === null || v === undefined) return null;
      if (!Array.isArray(v)) return MISS;
      const out = new Array(v.length);
      for (let i = 0; i < v.length; i++) {
        const x = item(v[i]);
        if (x === MISS) return MISS;
        out[i] = x;
      }
      return out;
    };
  }
  if (isScalarType(type) || isEnumType(type)) return selection ? null : leaf(type);
  if (isObjectType(type)) return selection ? object(type, selection) : null;
  return null;
}

function leaf(type: GraphQLLeafType): Complete {
  return (v) => {
    if (v === null || v === undefined) return null;
    if (v instanceof Error) return MISS;
    try {
      const s = type.serialize(v);
      // graphql-jit reports undefined and NaN as errors.
      return s === undefined || Number.isNaN(s) ? MISS : s;
    } catch {
      return MISS;
    }
  };
}

function object(type: GraphQLObjectType, selection: SelectionSetNode): Complete | null {
  if (type.isTypeOf) return null;
  const fields = type.getFields();
  const parts: { key: string; name: string; complete: Complete }[] = [];
  const keys = new Set<string>();
  for (const s of selection.selections) {
    if (s.kind !== Kind.FIELD || s.directives?.length || s.arguments?.length) return null;
    const name = s.name.value;
    const key = s.alias?.value ?? name;
    const def = fields[name];
    // A resolver (links, access rules, computed fields) or a merged response key: compiled query.
    // So is a response key `__…` (an alias may be `__proto__`, which an object literal does not
    // write as a key).
    if (!def || def.resolve || name.startsWith('__') || key.startsWith('__') || keys.has(key)) return null;
    const complete = completer(def.type, s.selectionSet);
    if (!complete) return null;
    keys.add(key);
    parts.push({ key, name, complete });
  }
  return objectCompleter(parts);
}

/**
 * The completer of one selection set, generated as graphql-jit generates its queries: each
 * property read by its name and the answer made by one object literal, so every answer of the
 * selection has one shape from the start. Filled in a loop (`out[key] = x`), an answer of ten
 * fields changed shape ten times and grew its property storage twice; the walk of a page of
 * records was ~8 % of an uncached read's server CPU (bench/NOTES.md, issue 31). Names and
 * response keys are GraphQL names (lexed as such), written as JSON string literals.
 */
function objectCompleter(parts: { key: string; name: string; complete: Complete }[]): Complete {
  const reads = parts
    .map((p, i) => `const x${i} = c[${i}](v[${JSON.stringify(p.name)}]); if (x${i} === MISS) return MISS;`)
    .join('\n');
  const literal = parts.map((p, i) => `${JSON.stringify(p.key)}: x${i}`).join(', ');
  const make = new Function(
    'c',
    'MISS',
    `return function complete(v) {
      if (v === null || v === undefined) return null;
      if (typeof v !== 'object' || v instanceof Error || typeof v.then === 'function') return MISS;
      ${reads}
      return { ${literal} };
    };`,
  ) as (c: Complete[], miss: typeof MISS) => Complete;
  return make(
    parts.map((p) => p.complete),
    MISS,
  );
}

/**
 * Runs a plan with the request's context; `compiled` (the compiled query, same context) answers
 * whenever the walk gives up. Same result as `compiled()` for a plain query.
 */
export async function runPlan(
  plan: Plan,
  context: unknown,
  compiled: () => Promise<ExecutionResult> | ExecutionResult,
): Promise<ExecutionResult> {
  let value: unknown;
  try {
    value = plan.resolve(undefined, JSON.parse(plan.args), context, plan.info);
    // graphql-jit awaits any thenable a resolver returns.
    if (value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function')
      value = await value;
  } catch {
    return compiled();
  }
  const data = plan.complete(value);
  if (data === MISS) return compiled();
  return { data: { [plan.key]: data } };
}
