import {
  getOperationAST,
  GraphQLError,
  Kind,
  parse,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { getVariableValues } from 'graphql/execution/values.js';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { BadUserInput, GraphqlValidationFailed } from '../errors.ts';
import { checkDocumentInputs, checkLimits, checkVariables, LIMITS, namingArguments } from './limits.ts';
import type { Lru } from './lru.ts';
import { documentKey } from './response-cache.ts';
import type { SchemaView } from './schema.ts';
import { jitDocument } from './variables.ts';
import { planOf, type Plan } from './plan.ts';

/**
 * Preparing a document for one schema view: parsed, limit-checked, validated and compiled by
 * graphql-jit, once per distinct document per view (the view's LRUs, graphql/schema-entries.ts).
 * A request after the first costs one lookup; a trusted document is compiled before it is asked
 * for (graphql/trusted.ts warmProject), so even the first request finds it here.
 */

/** A document ready to run for one schema view: what execute() and a subscribe() share. */
export interface Ready {
  ok: true;
  compiled: CompiledQuery;
  operation: 'query' | 'mutation' | 'subscription';
  op: OperationDefinitionNode;
  /** The parsed document (a subscribe() runs it; shared by every subscription of one text). */
  document: DocumentNode;
  /** Set when graphql-js coerces the variables (recursive input types, see variables.ts). */
  coerceWithGraphqlJs: boolean;
  /** Per variable, the argument it feeds: input errors name the argument. */
  argumentOf: ReadonlyMap<string, string>;
  /** A plain query's plan (graphql/plan.ts): executed by walking it, the compiled query as fallback. */
  plan: Plan | null;
}

export type Prepared = Ready | { ok: false; errors: readonly GraphQLError[] };

/** The prepared-document caches of one schema view (a SchemaEntry has them). */
export interface DocumentCaches {
  view: SchemaView;
  docs: Lru<string, Prepared>;
  /** Trusted documents compiled ahead (graphql/trusted.ts), by hash and operation name. */
  trusted: Lru<string, Prepared>;
}

/** What preparing needs of a request: its text and the operation it picks. */
export interface DocumentText {
  query: string;
  operationName?: string | null;
}

/**
 * Estimated heap a prepared document keeps alive (measured as heap growth over 200 compiled
 * documents of several shapes, graphql-jit 0.8): ~20 KB per compiled document, ~2.5 KB per
 * field node, and the source text (AST locations and error sources point at it), as UTF-16.
 */
const weights = new WeakMap<Prepared, number>();
export function preparedBytes(p: Prepared): number {
  return weights.get(p) ?? 20_480;
}

/** Parses, validates, limit-checks and compiles once per distinct document per schema view. */
export function prepareFor(target: { entry: DocumentCaches }, req: DocumentText): Prepared {
  const docKey = documentKey(req.operationName ?? '', req.query);
  let prepared = target.entry.docs.get(docKey);
  if (!prepared) {
    prepared = prepare(target.entry.view, req);
    target.entry.docs.set(docKey, prepared);
  }
  return prepared;
}

/**
 * A trusted document prepared for one schema view, by hash and operation name: compiled ahead
 * (graphql/trusted.ts warmProject), so a request naming it costs one lookup. A document that no
 * longer validates against this view says which document it is.
 */
export function prepareTrusted(
  target: { entry: DocumentCaches },
  hash: string,
  text: string,
  operationName: string | null,
): Prepared {
  const key = operationName ? `${hash}\0${operationName}` : hash;
  let prepared = target.entry.trusted.get(key);
  if (!prepared) {
    prepared = prepare(target.entry.view, { query: text, operationName });
    if (!prepared.ok) {
      const errors = prepared.errors.map((e) => {
        const message = `Trusted document sha256:${hash} does not validate against the current schema: ${e.message}`;
        return new GraphQLError(message, { originalError: new GraphqlValidationFailed(message) });
      });
      prepared = { ok: false, errors };
      weights.set(prepared, 1_024 + errors.reduce((n, e) => n + 512 + 2 * e.message.length, 0));
    }
    target.entry.trusted.set(key, prepared);
  }
  return prepared;
}

/** Validation only (no compile): the errors of a document against a view, empty when it validates. */
export function checkDocument(view: SchemaView, text: string): readonly GraphQLError[] {
  let doc: DocumentNode;
  try {
    doc = parse(text, { maxTokens: LIMITS.maxTokens });
  } catch (err) {
    return [err instanceof GraphQLError ? err : new GraphQLError('Syntax Error: the document is nested too deeply')];
  }
  const limit = checkLimits(doc, { fields: 0 });
  if (limit) return [limit];
  const inputs = checkDocumentInputs(doc);
  if (inputs.error) return [inputs.error];
  return validate(view.schema, doc, undefined, { maxErrors: 20 });
}

/**
 * Variables for the compiled document: coerced here by graphql-js when the document needs it
 * (variables.ts), else passed as given (graphql-jit coerces them itself).
 */
export function variablesFor(
  target: { entry: { view: { schema: GraphQLSchema } } },
  ready: Ready,
  raw: Record<string, unknown> | null | undefined,
  checked = false,
): { errors: readonly GraphQLError[] } | { values: Record<string, unknown> } {
  // Checked before any coercion (which recurses, and would hand PostgreSQL what it cannot store).
  const bad = checked ? null : checkVariables(raw, ready.argumentOf);
  if (bad) return { errors: [bad] };
  const values = raw ?? {};
  if (!ready.coerceWithGraphqlJs) return { values };
  const coerced = getVariableValues(target.entry.view.schema, ready.op.variableDefinitions ?? [], values, {
    maxErrors: 20,
  });
  return coerced.errors ? { errors: namingArguments(coerced.errors, ready.argumentOf) } : { values: coerced.coerced };
}

function prepare(view: SchemaView, req: DocumentText): Prepared {
  const stats = { fields: 0 };
  const p = prepareDocument(view, req, stats);
  const source = 2 * req.query.length + 2 * (req.operationName?.length ?? 0);
  weights.set(
    p,
    p.ok
      ? 20_480 + source + 2_560 * stats.fields
      : 1_024 + source + p.errors.reduce((n, e) => n + 512 + 2 * e.message.length, 0),
  );
  return p;
}

function prepareDocument(view: SchemaView, req: DocumentText, stats: { fields: number }): Prepared {
  let doc: DocumentNode;
  try {
    doc = parse(req.query, { maxTokens: LIMITS.maxTokens });
  } catch (err) {
    // The parser recurses: a document nested past the stack is a syntax error too, not ours.
    return {
      ok: false,
      errors: [err instanceof GraphQLError ? err : new GraphQLError('Syntax Error: the document is nested too deeply')],
    };
  }
  // Limits first: they are linear in the document, validation is not.
  const limit = checkLimits(doc, stats);
  if (limit) return { ok: false, errors: [limit] };
  const inputs = checkDocumentInputs(doc);
  if (inputs.error) return { ok: false, errors: [inputs.error] };
  const errors = validate(view.schema, doc, undefined, { maxErrors: 20 });
  if (errors.length) return { ok: false, errors };
  const op = getOperationAST(doc, req.operationName ?? undefined);
  if (!op) {
    const message = req.operationName
      ? `Unknown operation named "${req.operationName}"`
      : 'Must provide operation name if query contains multiple operations';
    return { ok: false, errors: [new GraphQLError(message, { originalError: new BadUserInput(message) })] };
  }
  const root =
    op.operation === 'mutation'
      ? view.schema.getMutationType()
      : op.operation === 'subscription'
        ? view.schema.getSubscriptionType()
        : view.schema.getQueryType();
  if (!root) {
    // graphql-js 16 does not reject an operation type the schema lacks (public keys have no
    // Mutation type); answer as for any field absent from the key's schema.
    const type = op.operation === 'mutation' ? 'Mutation' : 'Subscription';
    const errors = op.selectionSet.selections.map((s) => {
      const message = `Cannot query field "${s.kind === Kind.FIELD ? s.name.value : '...'}" on type "${type}".`;
      return new GraphQLError(message, { originalError: new GraphqlValidationFailed(message) });
    });
    return { ok: false, errors };
  }
  const forJit = jitDocument(view.schema, doc, op);
  const compiled = compileQuery(view.schema, forJit.document, req.operationName ?? undefined, {
    customJSONSerializer: false,
  });
  if (!isCompiledQuery(compiled)) return { ok: false, errors: compiled.errors ?? [] };
  return {
    ok: true,
    compiled,
    operation: op.operation,
    op,
    document: doc,
    coerceWithGraphqlJs: forJit.rewritten,
    argumentOf: inputs.argumentOf,
    plan: forJit.rewritten ? null : planOf(view.schema, op),
  };
}
