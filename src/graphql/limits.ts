import { BadUserInput, QueryLimitExceeded, SvcError } from '../errors.ts';
import {
  GraphQLError,
  Kind,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { checkInputValue, checkLiteral, type InputProblem } from './input-values.ts';

/**
 * Document and input limits. Every limit here is documented, with its default, in
 * docs/graphql.md ("Limits"). Document limits are checked once per distinct document, right
 * after parsing and before validation, so a breach is a clear 400 before any other work runs;
 * a request's inputs (literals, variable defaults, variables) before any coercion. The walks
 * over input values are input-values.ts; limits on coerced arguments, argument-limits.ts.
 */
export const LIMITS = {
  maxDepth: 12,
  maxAliases: 30,
  /** Each selected field costs 1, multiplied by the page size of every enclosing list field. */
  maxCost: 20_000,
  defaultPageSize: 20,
  maxPageSize: 100,
  maxBodyBytes: 1_000_000,
  maxBatchOperations: 100,
  /** Operations in one HTTP batch (a JSON array body); each counts against the rate limit. */
  maxHttpBatch: 20,
  /**
   * Field pairs graphql-js may compare in one selection set (fields with one response name,
   * counting fragments' fields as possibly alike): its overlap check is quadratic in them.
   */
  maxFieldPairs: 250_000,
  /** Lexical tokens of one document: bounds parsing and, with the limits above, validation. */
  maxTokens: 20_000,
  /** Nesting of any input value: a variable's JSON, a literal argument, a JSON field value. */
  maxInputDepth: 64,
  /** Nesting of AND / OR / NOT in one `where`. */
  maxFilterDepth: 16,
  /** Conditions plus list items (`in`, `notIn`, AND/OR branches) in one `where`. */
  maxFilterBreadth: 1_000,
  /** Sort keys in one `orderBy` (each becomes a selected column and a cursor value). */
  maxOrderBy: 8,
  /** Characters of a pagination cursor. */
  maxCursorLength: 2_000,
  /** How far search may page (its cursor is positional). */
  maxSearchOffset: 10_000,
} as const;

/**
 * Selection sets nested inside each other, counting fragment spreads, regardless of what counts
 * towards depth: bounds the walk's (and validation's) recursion.
 */
const MAX_NESTING = 100;
const LIST_FIELDS = /^(records|searchRecords|search[A-Z]\w*s|\w+s)$/;
/** The page of a connection (its items): counted once, at the connection field's page size. */
const PAGE_FIELDS = new Set(['edges', 'nodes']);
/** Root fields of the introspection system: their subtrees have their own bounded shape. */
const INTROSPECTION_ROOTS = new Set(['__schema', '__type']);

function limitError(message: string, code: QueryLimitExceeded['code']): GraphQLError {
  return new GraphQLError(message, { originalError: new QueryLimitExceeded(code, message), extensions: { code } });
}

/** Thrown inside the walk the moment a limit is passed: nothing after it is looked at. */
class Exceeded extends Error {
  constructor(readonly error: GraphQLError) {
    super(error.message);
  }
}

/**
 * What one selection set (or fragment) adds at multiplier 1. Cost is linear in the enclosing
 * multiplier, so one summary per fragment serves every place it is spread.
 */
interface Summary {
  /** Data depth below this point (introspection subtrees count 0). */
  depth: number;
  aliases: number;
  cost: number;
  /** Fields at the top level of the set, through inline fragments and spreads. */
  top: number;
}

type Mode = 'data' | 'introspection';

/**
 * Checks depth, aliases and cost of every operation and fragment of a (not yet validated)
 * document in time linear in its size: each fragment is summarised once per mode and its
 * summary reused at every spread, and the walk stops as soon as any running total passes its
 * limit. Introspection (`__schema`, `__type`) does not count towards the depth limit: its list
 * nesting is bounded by graphql-js's MaxIntrospectionDepthRule, and its fields still count
 * towards aliases and cost (never multiplied by page sizes).
 */
export function checkLimits(doc: DocumentNode, stats?: { fields: number }): GraphQLError | null {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions)
    if (d.kind === Kind.FRAGMENT_DEFINITION && !fragments.has(d.name.value)) fragments.set(d.name.value, d);
  const memo = new Map<string, Summary>();
  const inProgress = new Set<string>();

  const check = (s: Summary, base: number): void => {
    if (base + s.depth > LIMITS.maxDepth)
      throw new Exceeded(limitError(`Query depth exceeds the maximum of ${LIMITS.maxDepth}`, 'QUERY_TOO_DEEP'));
    if (s.aliases > LIMITS.maxAliases)
      throw new Exceeded(limitError(`Query uses more than ${LIMITS.maxAliases} aliases`, 'TOO_MANY_ALIASES'));
    if (s.cost > LIMITS.maxCost)
      throw new Exceeded(limitError(`Query cost exceeds the maximum of ${LIMITS.maxCost}`, 'QUERY_TOO_COMPLEX'));
  };

  const fragment = (name: string, mode: Mode): Summary => {
    const key = `${mode}:${name}`;
    const known = memo.get(key);
    if (known) return known;
    const f = fragments.get(name);
    // Unknown fragments and cycles are reported by validation; here they add nothing.
    if (!f || inProgress.has(key)) return { depth: 0, aliases: 0, cost: 0, top: 0 };
    inProgress.add(key);
    const s = selectionSet(f.selectionSet, mode);
    inProgress.delete(key);
    memo.set(key, s);
    return s;
  };

  const pageSize = (field: FieldNode): number => {
    const first = field.arguments?.find((a) => a.name.value === 'first');
    // A connection's `edges` / `nodes` are its page: the connection field already multiplied by it.
    if (!first && (!LIST_FIELDS.test(field.name.value) || PAGE_FIELDS.has(field.name.value))) return 1;
    // A variable may ask for any page size: count the largest.
    const n = !first
      ? LIMITS.defaultPageSize
      : first.value.kind === Kind.INT
        ? Number(first.value.value)
        : LIMITS.maxPageSize;
    return Math.max(1, Math.min(n, LIMITS.maxPageSize));
  };

  let nesting = 0;
  const selectionSet = (set: SelectionSetNode, mode: Mode): Summary => {
    if (++nesting > MAX_NESTING)
      throw new Exceeded(limitError(`Query nests selections more than ${MAX_NESTING} levels deep`, 'QUERY_TOO_DEEP'));
    const out: Summary = { depth: 0, aliases: 0, cost: 0, top: 0 };
    const names = new Map<string, number>();
    let pairs = 0;
    let direct = 0;
    for (const sel of set.selections) {
      let s: Summary;
      if (sel.kind === Kind.FIELD) {
        const name = sel.alias?.value ?? sel.name.value;
        const c = (names.get(name) ?? 0) + 1;
        names.set(name, c);
        pairs += 2 * c - 1;
        direct++;
        if (stats) stats.fields++;
        const intro = mode === 'introspection' || INTROSPECTION_ROOTS.has(sel.name.value);
        const sub = sel.selectionSet
          ? selectionSet(sel.selectionSet, intro ? 'introspection' : mode)
          : { depth: 0, aliases: 0, cost: 0, top: 0 };
        const m = intro || !sel.selectionSet ? 1 : pageSize(sel);
        s = {
          depth: mode === 'introspection' ? 0 : intro ? 1 : 1 + sub.depth,
          aliases: sub.aliases + (sel.alias ? 1 : 0),
          cost: 1 + m * sub.cost,
          top: 1,
        };
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        s = selectionSet(sel.selectionSet, mode);
      } else {
        s = fragment(sel.name.value, mode);
      }
      out.depth = Math.max(out.depth, s.depth);
      out.aliases += s.aliases;
      out.cost += s.cost;
      out.top += s.top;
      check(out, 0);
      // Fields reached through fragments may all share names: count them as if they did.
      const indirect = out.top - direct;
      if (pairs + indirect * (indirect + direct) > LIMITS.maxFieldPairs) {
        throw new Exceeded(
          limitError(
            `A selection set holds too many fields to compare (at most ${LIMITS.maxFieldPairs} pairs)`,
            'QUERY_TOO_COMPLEX',
          ),
        );
      }
    }
    nesting--;
    return out;
  };

  try {
    for (const d of doc.definitions)
      if (d.kind === Kind.OPERATION_DEFINITION) check(selectionSet(d.selectionSet, 'data'), 0);
    // Fragments nobody spreads are still validated: they must fit the limits too.
    for (const d of doc.definitions) {
      if (
        d.kind === Kind.FRAGMENT_DEFINITION &&
        !memo.has(`data:${d.name.value}`) &&
        !memo.has(`introspection:${d.name.value}`)
      ) {
        check(fragment(d.name.value, d.typeCondition.name.value.startsWith('__') ? 'introspection' : 'data'), 0);
      }
    }
  } catch (err) {
    if (err instanceof Exceeded) return err.error;
    throw err;
  }
  return null;
}

export function inputError(argument: string, problem: InputProblem, variable?: string): GraphQLError {
  const where = [variable ? `variable "$${variable}"` : '', problem.path ? `at "${problem.path}"` : '']
    .filter(Boolean)
    .join(' ');
  const message = `Invalid value for argument "${argument}"${where ? ` (${where})` : ''}: ${problem.reason}`;
  // Carried as an SvcError so the error boundary keeps `extensions.field`.
  return new GraphQLError(message, {
    originalError: new BadUserInput(message, { field: argument }),
    extensions: { code: 'BAD_USER_INPUT', field: argument },
  });
}

/**
 * Literal arguments and variable defaults of a document, checked like variables. Also returns,
 * per variable, the first argument it feeds, so a bad variable value names that argument.
 */
export function checkDocumentInputs(doc: DocumentNode): {
  error: GraphQLError | null;
  argumentOf: Map<string, string>;
} {
  const argumentOf = new Map<string, string>();
  // Iterative over every node that can hold arguments; values are walked by checkLiteral.
  const stack: unknown[] = [...doc.definitions];
  while (stack.length) {
    const node = stack.pop() as Record<string, any>;
    if (!node || typeof node !== 'object') continue;
    if (node.kind === Kind.VARIABLE_DEFINITION && node.defaultValue) {
      const problem = checkLiteral(node.defaultValue, LIMITS.maxInputDepth);
      if (problem)
        return { error: inputError(node.variable.name.value, problem, node.variable.name.value), argumentOf };
      continue;
    }
    if (node.kind === Kind.ARGUMENT) {
      const name = node.name.value as string;
      const problem = checkLiteral(node.value, LIMITS.maxInputDepth);
      if (problem) return { error: inputError(name, problem), argumentOf };
      collectVariables(node.value, name, argumentOf);
      continue;
    }
    for (const k of ['variableDefinitions', 'directives', 'arguments', 'selectionSet', 'selections']) {
      const child = node[k];
      if (Array.isArray(child)) stack.push(...child);
      else if (child) stack.push(child);
    }
  }
  return { error: null, argumentOf };
}

function collectVariables(value: ValueNode, argument: string, out: Map<string, string>): void {
  const stack: ValueNode[] = [value];
  while (stack.length) {
    const v = stack.pop()!;
    if (v.kind === Kind.VARIABLE) {
      if (!out.has(v.name.value)) out.set(v.name.value, argument);
    } else if (v.kind === Kind.LIST) stack.push(...v.values);
    else if (v.kind === Kind.OBJECT) for (const f of v.fields) stack.push(f.value);
  }
}

/**
 * GraphQL's own variable errors (`Variable "$p" of required type "String!" was not provided`,
 * a wrong type) name the variable; like every other input error they also name the argument
 * it feeds, as `extensions.field` (a missing password is `field: "password"`).
 */
export function namingArguments(
  errors: readonly GraphQLError[],
  argumentOf: ReadonlyMap<string, string>,
): readonly GraphQLError[] {
  return errors.map((e) => {
    const variable = /^Variable "\$([^"]+)"/.exec(e.message)?.[1];
    const argument = variable === undefined ? undefined : argumentOf.get(variable);
    if (argument === undefined || e.originalError instanceof SvcError) return e;
    return new GraphQLError(e.message, {
      nodes: e.nodes,
      originalError: new BadUserInput(e.message, { field: argument }),
      extensions: { code: 'BAD_USER_INPUT', field: argument },
    });
  });
}

/** The variables of one request, checked before any coercion (which recurses). */
export function checkVariables(
  variables: Record<string, unknown> | null | undefined,
  argumentOf: ReadonlyMap<string, string>,
): GraphQLError | null {
  if (!variables) return null;
  for (const [name, value] of Object.entries(variables)) {
    // Depth + 1: the variable itself is one level of the request's `variables` object.
    const problem = checkInputValue(value, LIMITS.maxInputDepth);
    if (problem) return inputError(argumentOf.get(name) ?? name, problem, name);
  }
  return null;
}
