import type { AuditFrom } from '../editorial/audit.ts';
import { auditMutation } from './audit.ts';
import { GraphQLError, printSchema, type ExecutionResult } from 'graphql';
import { getVariableValues } from 'graphql/execution/values.js';
import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import { BadUserInput, DocumentNotTrusted, MethodNotAllowed } from '../errors.ts';
import { documentPolicyOf, requestDocument, type RequestDocument } from './document-policy.ts';
import { checkVariables, namingArguments } from './limits.ts';
import { RecordLoader } from './loader.ts';
import type { GqlContext, GraphqlDeps } from './context.ts';
import { modelRowAccess, requestReaders } from '../content/field-access.ts';
import { variablesFor, type Ready } from './prepare.ts';
import { runPlan } from './plan.ts';
import { targetNow, targetOf, type Target } from './schema-entries.ts';
import {
  MAX_CACHED_BODY,
  publicCacheControl,
  responseCache,
  responseKey,
  stored,
  type Executed,
  type ResponseCache,
} from './response-cache.ts';

/**
 * The GraphQL core, shared by every transport (HTTP, graphql-ws). One execution is a few steps,
 * each its own module: the schema view of the key (schema-entries.ts: per project and key
 * fingerprint, emptied when the schema version moves), the document the request runs under its
 * key's policy, prepared for that view (document-policy.ts, prepare.ts: parsed, validated,
 * limit-checked and compiled by graphql-jit once), the response cache of published key-only reads
 * (response-cache.ts, emptied by every record change of the project), and here the run itself.
 * A cached read costs one Map lookup for the key, one for the response.
 *
 * The core answers with a plain `ExecutionResult` whose errors are not masked: each transport
 * masks them once at its boundary (graphql/errors.ts) and serialises in its own format.
 */
export interface GraphqlRequest {
  /** The document text; may be empty when `documentId` names the document. */
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
  /** SHA-256 (lowercase hex) of the document, from `documentId` or Apollo's `extensions.persistedQuery`. */
  documentId?: string | null;
  /** The hash came as Apollo's `extensions.persistedQuery` (APQ registration applies). */
  persisted?: boolean;
}

/** The resolver context of one request (a fresh loader: batching is per request). */
export function contextFor(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  target: Target,
  customer: CustomerPrincipal | null = null,
  lsn = 0,
  live = false,
): GqlContext {
  const { snapshot, entry } = target;
  // A request reads from one replica chosen now; a subscription's context (live) is routed per
  // statement, as it outlives the changes whose events it resolves (store/replicas.ts).
  const published = !deps.replicas
    ? deps.readSql
    : live
      ? deps.replicas.live(snapshot.id)
      : deps.replicas.route(snapshot.id, lsn);
  // Model `access.read`: owner-only and closed models of this reader (usually none).
  const access = modelRowAccess(snapshot.models, requestReaders({ principal, customer }));
  const rows =
    access.owned.length || access.closed.length
      ? { owned: access.owned, closed: access.closed, viewer: customer?.customerId ?? null }
      : undefined;
  return {
    svc: deps,
    principal,
    snapshot,
    models: entry.view.models,
    published,
    loader: new RecordLoader(
      deps.readSql,
      published,
      snapshot.id,
      snapshot.defaultLocale,
      entry.view.models,
      principal.allowedModels ? [...entry.view.models.keys()] : null,
      rows,
    ),
    noStore: false,
    customer,
    rows,
  };
}

function refused(errors: readonly GraphQLError[]): Executed {
  return { result: { errors }, rejected: true, cacheControl: 'no-store', body: undefined };
}

function failed(result: ExecutionResult): Executed {
  return { result, rejected: false, cacheControl: 'no-store', body: undefined };
}

/**
 * Whether the document's first operation is a mutation, read past GraphQL's ignored tokens
 * (whitespace, commas, a BOM, comments). Its answer is never cached, so looking it up only cost a
 * digest of the document and the JSON of its variables: ~9 µs a mutation in the write bench's
 * profile (docs/decisions.md, "Writes, session 5: service CPU per mutation"). A mutation named by operationName behind a
 * first query still looks up and misses, a read behind a first mutation runs uncached: slower at
 * worst, never a wrong answer.
 */
export function startsAsMutation(query: string): boolean {
  let i = 0;
  for (;;) {
    const c = query.charCodeAt(i);
    if (c === 32 || c === 9 || c === 10 || c === 13 || c === 44 || c === 0xfeff) i++;
    else if (c === 35) {
      // A comment runs to the end of its line.
      while (i < query.length && query.charCodeAt(i) !== 10 && query.charCodeAt(i) !== 13) i++;
    } else break;
  }
  if (!query.startsWith('mutation', i)) return false;
  const next = query.charCodeAt(i + 8);
  // `mutationFoo` would be a name (and a syntax error): only a name's end counts.
  return !(next === 95 || (next >= 48 && next <= 57) || (next >= 65 && next <= 90) || (next >= 97 && next <= 122));
}

export interface ExecuteOptions {
  /** Mutations are refused over GET (GraphQL over HTTP); other transports say POST. */
  method: 'GET' | 'POST';
  /** A verified customer token came with the key: the read is per customer and never shared-cached. */
  customer: CustomerPrincipal | null;
  /** The client's address (login throttling), asked when a resolver needs it. */
  clientIp?: (() => string | null) | null;
  /**
   * The commit LSN the client presented (`x-svc-lsn`, store/replicas.ts): published reads wait
   * for a replica that has replayed it, and skip the response cache (it may predate the write).
   */
  lsn?: number;
  /** Set by execute when it ran a mutation: the HTTP layer then names the commit's LSN (http/replica-lsn.ts). */
  wrote?: boolean;
  /** The request's origin for the audit log (writes ask for it). */
  auditFrom?: (() => AuditFrom) | null;
}

/** Runs one query or mutation. Rejects with SvcErrors for requests that cannot be GraphQL at all. */
export async function execute(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  req: GraphqlRequest,
  opts: ExecuteOptions,
): Promise<Executed> {
  return executeNow(deps, principal, req, opts);
}

/**
 * execute() without a promise when the answer is in memory: the project's actor live, the
 * document known (text or trusted) and the response cached — a cached read runs no microtask at
 * all. It may throw instead of rejecting (the HTTP adapter catches both).
 */
export function executeNow(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  req: GraphqlRequest,
  opts: ExecuteOptions,
): Executed | Promise<Executed> {
  const target = targetNow(deps, principal, opts.customer);
  if (target instanceof Promise) return target.then((t) => executeAt(deps, principal, req, opts, t));
  return executeAt(deps, principal, req, opts, target);
}

function executeAt(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  req: GraphqlRequest,
  opts: ExecuteOptions,
  target: Target,
): Executed | Promise<Executed> {
  // Which document: its text, or a trusted / persisted one named by hash, as the key's policy
  // allows; prepared (a memo lookup for a known document) before the response key: the variables
  // are bounded (depth, strings) before anything walks them recursively, JSON.stringify included
  // (20,000 nested AND levels overflowed its stack: issue 27 item 13).
  const found = requestDocument(deps, target, principal, req);
  if (found instanceof Promise) return found.then((d) => executeDocument(deps, principal, req, opts, target, d));
  return executeDocument(deps, principal, req, opts, target, found);
}

function executeDocument(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  req: GraphqlRequest,
  opts: ExecuteOptions,
  target: Target,
  { doc, prepared }: RequestDocument,
): Executed | Promise<Executed> {
  if (!prepared.ok) return refused(prepared.errors);
  const badVariables = checkVariables(req.variables, prepared.argumentOf);
  if (badVariables) return failed({ errors: [badVariables] });
  // Only reads are cached: no response key otherwise.
  if (prepared.operation === 'mutation') opts.wrote = true;
  const rc =
    opts.customer !== null || !deps.settings.responseCache || opts.lsn || prepared.operation !== 'query'
      ? undefined
      : responseCache(target.actor);
  const key = rc ? responseKey(principal.fingerprint, req, doc, prepared) : '';
  if (rc) {
    const hit = rc.entries.get(key);
    if (deps.cacheStats) deps.cacheStats[hit ? 'hits' : 'misses']++;
    if (hit) return hit;
  }

  if (prepared.operation === 'mutation' && opts.method === 'GET')
    throw new MethodNotAllowed('Mutations are not allowed over GET; use POST', undefined, { allow: 'POST' });
  if (prepared.operation === 'subscription') {
    const message = 'Subscriptions are served over WebSocket at /graphql/ws';
    return refused([new GraphQLError(message, { originalError: new BadUserInput(message) })]);
  }
  return run(deps, principal, req, opts, target, prepared, rc, key);
}

/** Executes a prepared query or mutation (no cached answer), storing a shareable read's answer. */
async function run(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  req: GraphqlRequest,
  opts: ExecuteOptions,
  target: Target,
  prepared: Ready,
  rc: ResponseCache | undefined,
  key: string,
): Promise<Executed> {
  const ctx = contextFor(deps, principal, target, opts.customer, opts.lsn);
  ctx.clientIp = opts.clientIp ?? undefined;
  ctx.auditFrom = opts.auditFrom ?? undefined;
  const gen = rc?.gen;
  const variables = variablesFor(target, prepared, req.variables, true);
  if ('errors' in variables) return failed({ errors: variables.errors });
  let result: ExecutionResult;
  try {
    const compiled = () => prepared.compiled.query(undefined, ctx, variables.values);
    result = await (prepared.plan ? runPlan(prepared.plan, ctx, compiled) : compiled());
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    return failed({ errors: [new GraphQLError(e.message, { originalError: e })] });
  }
  if (result.errors?.length) {
    if (result.data === undefined && result.errors[0]?.message.startsWith('Variable "$')) {
      // graphql-jit names only the innermost input field; graphql-js gives the full path
      // ("at \"d.hero.url\""), so the rare error path re-coerces for a clearer message.
      const coerced = getVariableValues(
        target.entry.view.schema,
        prepared.op.variableDefinitions ?? [],
        req.variables ?? {},
        { maxErrors: 20 },
      );
      if (coerced.errors?.length) return failed({ errors: namingArguments(coerced.errors, prepared.argumentOf) });
      return failed({ errors: namingArguments(result.errors, prepared.argumentOf) });
    }
    return failed(result);
  }
  if (prepared.operation === 'mutation') await auditMutation(ctx, prepared.op, variables.values);
  const body = prepared.compiled.stringify(result);
  const isRead = prepared.operation === 'query';
  const cacheControl =
    !isRead || ctx.noStore
      ? 'no-store'
      : opts.customer !== null
        ? 'private, no-store'
        : publicCacheControl(target.snapshot);
  if (rc && isRead && !ctx.noStore && rc.gen === gen && body.length <= MAX_CACHED_BODY)
    rc.entries.set(key, stored(body, cacheControl));
  return { result, rejected: false, cacheControl, body };
}

export async function schemaSdl(deps: Pick<GraphqlDeps, 'projects'>, principal: KeyPrincipal): Promise<string> {
  const target = await targetOf(deps, principal);
  // Introspection is refused to trusted-only keys: the SDL is the same thing in another form.
  if (documentPolicyOf(principal, target.snapshot) === 'trusted-only')
    throw new DocumentNotTrusted('This key runs trusted documents only: its schema is not served');
  const { entry } = target;
  entry.sdl ??= printSchema(entry.view.schema);
  return entry.sdl;
}
