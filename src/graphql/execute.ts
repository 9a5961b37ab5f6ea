import { getOperationAST, GraphQLError, Kind, parse, printSchema, validate, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import { jitDocument } from './variables.ts';
import { getVariableValues } from 'graphql/execution/values.js';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import type { Service } from '../service.ts';
import type { KeyPrincipal } from '../auth/principal.ts';
import type { ProjectActor, ProjectSnapshot } from '../actors/project.ts';
import { BadUserInput, MethodNotAllowed, toSvcError } from '../errors.ts';
import { buildSchema, type SchemaView } from './schema.ts';
import { Lru } from './lru.ts';
import { checkLimits } from './limits.ts';
import { maskError, type WireError } from './errors.ts';
import { RecordLoader } from './loader.ts';
import type { GqlContext } from './context.ts';

/**
 * The execution path. Per project (in ProjectActor.derived, emptied when the schema version
 * moves): one generated schema per key fingerprint, each with an LRU of prepared documents
 * (parsed, validated, limit-checked, compiled by graphql-jit), and one response cache of
 * published key-only reads, emptied by every record change of the project.
 * A cached read therefore costs: one Map lookup for the key, one for the response.
 */
export interface GraphqlRequest {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

export interface GraphqlResponse {
  status: number;
  body: string;
  cacheControl: string;
}

type Prepared =
  | {
      ok: true;
      compiled: CompiledQuery;
      operation: 'query' | 'mutation' | 'subscription';
      op: OperationDefinitionNode;
      /** Set when graphql-js coerces the variables (recursive input types, see variables.ts). */
      coerceWithGraphqlJs: boolean;
    }
  | { ok: false; status: number; errors: WireError[] };

interface SchemaEntry {
  version: number;
  view: SchemaView;
  docs: Lru<string, Prepared>;
  sdl?: string;
}

interface ResponseCache {
  /** Bumped on every invalidation: an execution that started before must not store its result. */
  gen: number;
  entries: Lru<string, GraphqlResponse>;
}

export const CACHE_MAX_AGE = 30;
const DOCS_PER_SCHEMA = 500;
const RESPONSES_PER_PROJECT = 2000;
const MAX_CACHED_BODY = 512 * 1024;
const RESPONSES = 'gql:responses';

function schemaEntry(actor: ProjectActor, snapshot: ProjectSnapshot, principal: KeyPrincipal): SchemaEntry {
  const key = `gql:schema:${principal.fingerprint}`;
  let entry = actor.derived.get(key) as SchemaEntry | undefined;
  if (!entry || entry.version !== snapshot.schemaVersion) {
    entry = { version: snapshot.schemaVersion, view: buildSchema(snapshot, principal), docs: new Lru(DOCS_PER_SCHEMA) };
    actor.derived.set(key, entry);
  }
  return entry;
}

function responseCache(actor: ProjectActor): ResponseCache {
  let rc = actor.derived.get(RESPONSES) as ResponseCache | undefined;
  if (!rc) {
    rc = { gen: 0, entries: new Lru(RESPONSES_PER_PROJECT) };
    actor.derived.set(RESPONSES, rc);
  }
  return rc;
}

const installed = new WeakSet<Service>();

/** Subscribes once per Service: record changes (from any process) empty that project's response cache. */
export function installResponseInvalidation(svc: Service): void {
  if (installed.has(svc)) return;
  installed.add(svc);
  const drop = (projectId: string) => {
    const rc = svc.projects.peek(projectId)?.derived.get(RESPONSES) as ResponseCache | undefined;
    if (rc) {
      rc.gen++;
      rc.entries.clear();
    }
  };
  svc.bus.subscribe((e) => {
    if (e.type === 'record.changed' || e.type === 'schema.changed' || e.type === 'project.changed') drop(e.projectId);
  });
  // Changes made while the listener was away were never heard: every cached response may be stale.
  svc.bus.onReconnect(() => {
    for (const projectId of svc.projects.keys()) drop(projectId);
  });
}

function prepare(view: SchemaView, req: GraphqlRequest, production: boolean): Prepared {
  let doc: DocumentNode;
  try {
    doc = parse(req.query, { maxTokens: 20_000 });
  } catch (err) {
    return { ok: false, status: 400, errors: [maskError(err as GraphQLError, production)] };
  }
  const errors = validate(view.schema, doc, undefined, { maxErrors: 20 });
  if (errors.length) return { ok: false, status: 400, errors: errors.map((e) => maskError(e, production)) };
  const op = getOperationAST(doc, req.operationName ?? undefined);
  if (!op) {
    const message = req.operationName ? `Unknown operation named "${req.operationName}"` : 'Must provide operation name if query contains multiple operations';
    return { ok: false, status: 400, errors: [{ message, extensions: { code: 'BAD_USER_INPUT' } }] };
  }
  const root = op.operation === 'mutation' ? view.schema.getMutationType() : op.operation === 'subscription' ? view.schema.getSubscriptionType() : view.schema.getQueryType();
  if (!root) {
    // graphql-js 16 does not reject an operation type the schema lacks (public keys have no
    // Mutation type); answer as for any field absent from the key's schema.
    const type = op.operation === 'mutation' ? 'Mutation' : 'Subscription';
    const errors = op.selectionSet.selections.map((s) => ({
      message: `Cannot query field "${s.kind === Kind.FIELD ? s.name.value : '...'}" on type "${type}".`,
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    }));
    return { ok: false, status: 400, errors };
  }
  const limit = checkLimits(doc, op);
  if (limit) return { ok: false, status: 400, errors: [maskError(limit, production)] };
  const forJit = jitDocument(view.schema, doc, op);
  const compiled = compileQuery(view.schema, forJit.document, req.operationName ?? undefined, { customJSONSerializer: false });
  if (!isCompiledQuery(compiled)) {
    return { ok: false, status: 400, errors: (compiled.errors ?? []).map((e) => maskError(e, production)) };
  }
  return { ok: true, compiled, operation: op.operation, op, coerceWithGraphqlJs: forJit.rewritten };
}

function errorResponse(status: number, errors: WireError[]): GraphqlResponse {
  return { status, body: JSON.stringify({ errors }), cacheControl: 'no-store' };
}

export interface ExecuteOptions {
  method: 'GET' | 'POST';
  /** A customer token came with the key: the read is per customer and never shared-cached. */
  customer: boolean;
}

export async function executeGraphql(svc: Service, principal: KeyPrincipal, req: GraphqlRequest, opts: ExecuteOptions): Promise<GraphqlResponse> {
  if (typeof req.query !== 'string' || req.query.length === 0) throw new BadUserInput('The request needs a "query" string');
  const actor = await svc.projects.get(principal.projectId);
  const snapshot = actor.snapshot;
  const entry = schemaEntry(actor, snapshot, principal);
  const production = svc.settings.production;
  const docKey = `${req.operationName ?? ''}\0${req.query}`;

  const rc = opts.customer || !svc.settings.responseCache ? undefined : responseCache(actor);
  const responseKey = rc ? `${principal.fingerprint}\0${docKey}\0${req.variables ? JSON.stringify(req.variables) : ''}` : '';
  if (rc) {
    const hit = rc.entries.get(responseKey);
    if (hit) return hit;
  }

  let prepared = entry.docs.get(docKey);
  if (!prepared) {
    prepared = prepare(entry.view, req, production);
    entry.docs.set(docKey, prepared);
  }
  if (!prepared.ok) return errorResponse(prepared.status, prepared.errors);
  if (prepared.operation === 'mutation' && opts.method === 'GET') throw new MethodNotAllowed('Mutations are not allowed over GET; use POST');
  if (prepared.operation === 'subscription') return errorResponse(400, [{ message: 'Subscriptions are served over WebSocket at /graphql/ws', extensions: { code: 'BAD_USER_INPUT' } }]);

  const ctx: GqlContext = {
    svc,
    principal,
    snapshot,
    models: entry.view.models,
    loader: new RecordLoader(svc.readSql, snapshot.id, snapshot.defaultLocale, entry.view.models, principal.allowedModels ? [...entry.view.models.keys()] : null),
    noStore: false,
  };
  const gen = rc?.gen;
  let result;
  let variables = req.variables ?? {};
  if (prepared.coerceWithGraphqlJs) {
    const coerced = getVariableValues(entry.view.schema, prepared.op.variableDefinitions ?? [], variables, { maxErrors: 20 });
    if (coerced.errors) return errorResponse(200, coerced.errors.map((e) => maskError(e, production)));
    variables = coerced.coerced;
  }
  try {
    result = await prepared.compiled.query(undefined, ctx, variables);
  } catch (err) {
    const e = toSvcError(err);
    return errorResponse(200, [maskError(e, production)]);
  }
  if (result.errors?.length) {
    let raw: readonly GraphQLError[] = result.errors;
    if (result.data === undefined && raw[0]?.message.startsWith('Variable "$')) {
      // graphql-jit names only the innermost input field; graphql-js gives the full path
      // ("at \"d.hero.url\""), so the rare error path re-coerces for a clearer message.
      const coerced = getVariableValues(entry.view.schema, prepared.op.variableDefinitions ?? [], req.variables ?? {}, { maxErrors: 20 });
      if (coerced.errors?.length) raw = coerced.errors;
    }
    const errors = raw.map((e) => maskError(e, production));
    const body = JSON.stringify(result.data === undefined ? { errors } : { errors, data: result.data });
    return { status: 200, body, cacheControl: 'no-store' };
  }
  const body = prepared.compiled.stringify(result);
  const isRead = prepared.operation === 'query';
  const cacheControl = !isRead || ctx.noStore ? 'no-store' : opts.customer ? 'private, no-store' : `public, max-age=${CACHE_MAX_AGE}`;
  const response: GraphqlResponse = { status: 200, body, cacheControl };
  if (rc && isRead && !ctx.noStore && rc.gen === gen && body.length <= MAX_CACHED_BODY) rc.entries.set(responseKey, response);
  return response;
}

/** The SDL of the schema this key sees (GET /schema). */
export async function schemaSdl(svc: Service, principal: KeyPrincipal): Promise<string> {
  const actor = await svc.projects.get(principal.projectId);
  const entry = schemaEntry(actor, actor.snapshot, principal);
  entry.sdl ??= printSchema(entry.view.schema);
  return entry.sdl;
}
