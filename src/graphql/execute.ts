import type { AuditFrom } from '../editorial/audit.ts';
import { auditMutation } from './audit.ts';
import {
  getOperationAST,
  GraphQLError,
  Kind,
  parse,
  printSchema,
  validate,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { jitDocument } from './variables.ts';
import { getVariableValues } from 'graphql/execution/values.js';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import type { ProjectActor, ProjectSnapshot } from '../projects/actor.ts';
import { BadUserInput, DocumentNotTrusted, GraphqlValidationFailed, MethodNotAllowed } from '../errors.ts';
import { documentPolicyOf, resolveDocument } from './document-policy.ts';
import { buildSchema, type SchemaView } from './schema.ts';
import { customerGrants } from './grants.ts';
import { Lru, processCacheBudget } from './lru.ts';
import { checkDocumentInputs, checkLimits, checkVariables, LIMITS, namingArguments } from './limits.ts';
import { RecordLoader } from './loader.ts';
import type { GqlContext, GraphqlDeps } from './context.ts';
import { modelRowAccess, requestReaders } from '../content/field-access.ts';
import {
  CACHE_MAX_AGE,
  digest,
  documentKey,
  MAX_CACHED_BODY,
  responseCache,
  stored,
  type Executed,
} from './response-cache.ts';

/**
 * The GraphQL core, shared by every transport (HTTP, graphql-ws). Per project (in
 * ProjectActor.derived, emptied when the schema version moves): one generated schema per key
 * fingerprint, each with an LRU of prepared documents (parsed, validated, limit-checked,
 * compiled by graphql-jit), and one response cache of published key-only reads, emptied by
 * every record change of the project (response-cache.ts). A cached read costs one Map lookup
 * for the key, one for the response.
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
}

export type Prepared = Ready | { ok: false; errors: readonly GraphQLError[] };

interface SchemaEntry {
  version: number;
  view: SchemaView;
  docs: Lru<string, Prepared>;
  /** Trusted documents compiled ahead (graphql/trusted.ts), by hash and operation name. */
  trusted: Lru<string, Prepared>;
  sdl?: string;
}

/** Where an operation of one principal runs: its project's actor, snapshot and schema view. */
export interface Target {
  actor: ProjectActor;
  snapshot: ProjectSnapshot;
  entry: SchemaEntry;
}

const DOCS_PER_SCHEMA = 500;
const DOC_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * Estimated heap a prepared document keeps alive (measured as heap growth over 200 compiled
 * documents of several shapes, graphql-jit 0.8): ~20 KB per compiled document, ~2.5 KB per
 * field node, and the source text (AST locations and error sources point at it), as UTF-16.
 */
const weights = new WeakMap<Prepared, number>();
function preparedBytes(p: Prepared): number {
  return weights.get(p) ?? 20_480;
}

const docCache = (): Lru<string, Prepared> =>
  new Lru({
    kind: 'documents',
    maxEntries: DOCS_PER_SCHEMA,
    maxBytes: DOC_CACHE_BYTES,
    sizeOf: preparedBytes,
    budget: processCacheBudget,
  });

/** As many entries as a project may hold trusted documents (src/documents/store.ts), one name each. */
const trustedCache = (): Lru<string, Prepared> =>
  new Lru({
    kind: 'trusted-documents',
    maxEntries: 2_000,
    maxBytes: 64 * 1024 * 1024,
    sizeOf: preparedBytes,
    budget: processCacheBudget,
  });

/**
 * Schemas of key plus customer grants, per project: one per distinct grant set, so bounded here
 * (entries and bytes) rather than left to grow with the roles customers happen to hold.
 */
const CUSTOMER_SCHEMAS = 64;
const CUSTOMER_SCHEMA_BYTES = 32 * 1024 * 1024;
const customerSchemas = (actor: ProjectActor): Lru<string, SchemaEntry> => {
  let lru = actor.derived.get('gql:customer-schemas') as Lru<string, SchemaEntry> | undefined;
  if (!lru) {
    lru = new Lru({
      kind: 'customer-schemas',
      maxEntries: CUSTOMER_SCHEMAS,
      maxBytes: CUSTOMER_SCHEMA_BYTES,
      sizeOf: (e) => schemaBytes(e.view),
      budget: processCacheBudget,
    });
    actor.derived.set('gql:customer-schemas', lru);
  }
  return lru;
};

/**
 * Fleet members with one shape key (group version + own operations, ProjectSnapshot.shapeKey)
 * serve the same API: they share one generated schema and one compiled-query cache per key
 * restriction, process-wide, instead of one per project. Resolvers take the project from the
 * request context, never from the schema, so sharing is safe. Bounded like every GraphQL cache.
 */
const SHARED_SCHEMAS = 512;
const SHARED_SCHEMA_BYTES = 64 * 1024 * 1024;
const sharedSchemas = new Lru<string, SchemaEntry>({
  kind: 'fleet-schemas',
  maxEntries: SHARED_SCHEMAS,
  maxBytes: SHARED_SCHEMA_BYTES,
  sizeOf: (e) => schemaBytes(e.view),
  budget: processCacheBudget,
});

/** Estimated heap of a generated schema: measured ~60 KB base plus ~12 KB per visible model (graphql 16). */
function schemaBytes(view: SchemaView): number {
  return 61_440 + 12_288 * view.models.size;
}

function schemaEntry(
  actor: ProjectActor,
  snapshot: ProjectSnapshot,
  principal: KeyPrincipal,
  customer?: CustomerPrincipal | null,
): SchemaEntry {
  const grants = customerGrants(snapshot, principal, customer);
  // The view is that of the key's scopes plus the token's stamped grants: its cache key names both.
  const key = grants ? `gql:schema:${principal.fingerprint}:${grants.key}` : `gql:schema:${principal.fingerprint}`;
  if (snapshot.shapeKey !== null) {
    const shared = `${snapshot.shapeKey}:${key}`;
    let entry = sharedSchemas.get(shared);
    if (!entry) {
      entry = {
        version: snapshot.schemaVersion,
        view: buildSchema(snapshot, principal, grants),
        docs: docCache(),
        trusted: trustedCache(),
      };
      sharedSchemas.set(shared, entry);
    }
    return entry;
  }
  const cache = grants ? customerSchemas(actor) : null;
  let entry = (cache ? cache.get(key) : actor.derived.get(key)) as SchemaEntry | undefined;
  if (!entry || entry.version !== snapshot.schemaVersion) {
    entry = {
      version: snapshot.schemaVersion,
      view: buildSchema(snapshot, principal, grants),
      docs: docCache(),
      trusted: trustedCache(),
    };
    if (cache) cache.set(key, entry);
    else actor.derived.set(key, entry);
  }
  return entry;
}

/** The schema entry of a key (no customer): compiling trusted documents ahead uses it. */
export function schemaEntryFor(actor: ProjectActor, snapshot: ProjectSnapshot, principal: KeyPrincipal): SchemaEntry {
  return schemaEntry(actor, snapshot, principal, null);
}

/** Shared fleet schemas held by this process (tests and the bench measure sharing with it). */
export function sharedSchemaCount(): number {
  return sharedSchemas.size;
}

/** The project actor and schema view an operation of this principal runs against. */
export async function targetOf(
  deps: Pick<GraphqlDeps, 'projects'>,
  principal: KeyPrincipal,
  customer?: CustomerPrincipal | null,
): Promise<Target> {
  const actor = await deps.projects.get(principal.projectId);
  const snapshot = actor.snapshot;
  return { actor, snapshot, entry: schemaEntry(actor, snapshot, principal, customer) };
}

/** The schema this principal sees (subscribe() needs it beside the compiled document). */
export function schemaOf(target: Target): GraphQLSchema {
  return target.entry.view.schema;
}

/** Parses, validates, limit-checks and compiles once per distinct document per schema view. */
export function prepareFor(target: Target, req: GraphqlRequest): Prepared {
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
export function prepareTrusted(target: Target, hash: string, text: string, operationName: string | null): Prepared {
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

/**
 * Variables for the compiled document: coerced here by graphql-js when the document needs it
 * (variables.ts), else passed as given (graphql-jit coerces them itself).
 */
export function variablesFor(
  target: Target,
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

function prepare(view: SchemaView, req: GraphqlRequest): Prepared {
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

function prepareDocument(view: SchemaView, req: GraphqlRequest, stats: { fields: number }): Prepared {
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

/** Runs one query or mutation. Throws SvcErrors for requests that cannot be GraphQL at all. */
export async function execute(
  deps: GraphqlDeps,
  principal: KeyPrincipal,
  req: GraphqlRequest,
  opts: ExecuteOptions,
): Promise<Executed> {
  const target = await targetOf(deps, principal, opts.customer);
  // Which document: its text, or a trusted / persisted one named by hash, as the key's policy allows.
  const found = resolveDocument(deps, target, principal, req);
  const doc = found instanceof Promise ? await found : found;
  // Prepared (a memo lookup for a known document) before the response key: the variables are
  // bounded (depth, strings) before anything walks them recursively, JSON.stringify included
  // (20,000 nested AND levels overflowed its stack: issue 27 item 13).
  const prepared = doc.trusted
    ? prepareTrusted(target, doc.trusted, doc.query, req.operationName ?? null)
    : prepareFor(target, doc.query === req.query ? req : { ...req, query: doc.query });
  if (!prepared.ok) return refused(prepared.errors);
  const badVariables = checkVariables(req.variables, prepared.argumentOf);
  if (badVariables) return failed({ errors: [badVariables] });
  // Only reads are cached: no response key (a SHA-256 of the document and its variables' JSON) otherwise.
  if (prepared.operation === 'mutation') opts.wrote = true;
  const rc =
    opts.customer !== null || !deps.settings.responseCache || opts.lsn || prepared.operation !== 'query'
      ? undefined
      : responseCache(target.actor);
  // A trusted document is keyed by its hash: without variables, no SHA-256 at all (the key is
  // fingerprint, hash and operation name: ~120 characters, never the document).
  const responseKey = !rc
    ? ''
    : doc.trusted && !req.variables
      ? `t\0${principal.fingerprint}\0${doc.trusted}\0${req.operationName ?? ''}`
      : digest(
          principal.fingerprint,
          req.operationName ?? '',
          doc.trusted ?? doc.query,
          doc.trusted ? '\u0001' : '',
          req.variables ? JSON.stringify(req.variables) : '',
        );
  if (rc) {
    const hit = rc.entries.get(responseKey);
    if (deps.cacheStats) deps.cacheStats[hit ? 'hits' : 'misses']++;
    if (hit) return hit;
  }

  if (prepared.operation === 'mutation' && opts.method === 'GET')
    throw new MethodNotAllowed('Mutations are not allowed over GET; use POST', undefined, { allow: 'POST' });
  if (prepared.operation === 'subscription') {
    const message = 'Subscriptions are served over WebSocket at /graphql/ws';
    return refused([new GraphQLError(message, { originalError: new BadUserInput(message) })]);
  }

  const ctx = contextFor(deps, principal, target, opts.customer, opts.lsn);
  ctx.clientIp = opts.clientIp ?? undefined;
  ctx.auditFrom = opts.auditFrom ?? undefined;
  const gen = rc?.gen;
  const variables = variablesFor(target, prepared, req.variables, true);
  if ('errors' in variables) return failed({ errors: variables.errors });
  let result: ExecutionResult;
  try {
    result = await prepared.compiled.query(undefined, ctx, variables.values);
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
    rc.entries.set(responseKey, stored(body, cacheControl));
  return { result, rejected: false, cacheControl, body };
}

/**
 * `Cache-Control` of a shareable read: the project's `cache.maxAge` (default CACHE_MAX_AGE) and
 * `cache.staleWhileRevalidate` (default the same), made once per snapshot.
 */
const cacheControls = new WeakMap<ProjectSnapshot, string>();
export function publicCacheControl(snapshot: ProjectSnapshot): string {
  let cc = cacheControls.get(snapshot);
  if (cc === undefined) {
    const c = (snapshot.settings.cache ?? {}) as { maxAge?: unknown; staleWhileRevalidate?: unknown };
    const whole = (v: unknown, d: number) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : d);
    const maxAge = whole(c.maxAge, CACHE_MAX_AGE);
    cc = `public, max-age=${maxAge}, stale-while-revalidate=${whole(c.staleWhileRevalidate, maxAge)}`;
    cacheControls.set(snapshot, cc);
  }
  return cc;
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
