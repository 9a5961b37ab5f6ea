import type { GraphQLSchema } from 'graphql';
import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import type { ProjectActor, ProjectSnapshot } from '../projects/actor.ts';
import type { GraphqlDeps } from './context.ts';
import { customerGrants } from './grants.ts';
import { Lru, processCacheBudget } from './lru.ts';
import { preparedBytes, type DocumentCaches, type Prepared } from './prepare.ts';
import { buildSchema, type SchemaView } from './schema.ts';

/**
 * The schema views of a project, per key restriction (in ProjectActor.derived, emptied when the
 * schema version moves): one generated schema per key fingerprint (plus customer grants), each
 * with its LRUs of prepared documents (graphql/prepare.ts). Fleet members with one shape share
 * them process-wide.
 */
export interface SchemaEntry extends DocumentCaches {
  version: number;
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

const newEntry = (snapshot: ProjectSnapshot, principal: KeyPrincipal, grants: ReturnType<typeof customerGrants>) => ({
  version: snapshot.schemaVersion,
  view: buildSchema(snapshot, principal, grants),
  docs: docCache(),
  trusted: trustedCache(),
});

/**
 * The cache key of a key's own view, made once per principal (principals are cached per key):
 * the same string each request, so its hash is computed once too (building and hashing it was
 * ~0.3 µs of a cached read; bench/NOTES.md, issue 31).
 */
const plainKeys = new WeakMap<KeyPrincipal, string>();
function plainKey(principal: KeyPrincipal): string {
  let key = plainKeys.get(principal);
  if (key === undefined) plainKeys.set(principal, (key = `gql:schema:${principal.fingerprint}`));
  return key;
}

function schemaEntry(
  actor: ProjectActor,
  snapshot: ProjectSnapshot,
  principal: KeyPrincipal,
  customer?: CustomerPrincipal | null,
): SchemaEntry {
  const grants = customerGrants(snapshot, principal, customer);
  // The view is that of the key's scopes plus the token's stamped grants: its cache key names both.
  const key = grants ? `gql:schema:${principal.fingerprint}:${grants.key}` : plainKey(principal);
  if (snapshot.shapeKey !== null) {
    const shared = `${snapshot.shapeKey}:${key}`;
    let entry = sharedSchemas.get(shared);
    if (!entry) {
      entry = newEntry(snapshot, principal, grants);
      sharedSchemas.set(shared, entry);
    }
    return entry;
  }
  const cache = grants ? customerSchemas(actor) : null;
  let entry = (cache ? cache.get(key) : actor.derived.get(key)) as SchemaEntry | undefined;
  if (!entry || entry.version !== snapshot.schemaVersion) {
    entry = newEntry(snapshot, principal, grants);
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
  return targetNow(deps, principal, customer);
}

/** targetOf() without a promise when the project's actor is live (every request after its first). */
export function targetNow(
  deps: Pick<GraphqlDeps, 'projects'>,
  principal: KeyPrincipal,
  customer?: CustomerPrincipal | null,
): Target | Promise<Target> {
  const live = deps.projects.peek(principal.projectId);
  if (live) return targetIn(live, principal, customer);
  return deps.projects.get(principal.projectId).then((actor) => targetIn(actor, principal, customer));
}

function targetIn(actor: ProjectActor, principal: KeyPrincipal, customer?: CustomerPrincipal | null): Target {
  const snapshot = actor.snapshot;
  return { actor, snapshot, entry: schemaEntry(actor, snapshot, principal, customer) };
}

/** The schema this principal sees (subscribe() needs it beside the compiled document). */
export function schemaOf(target: Target): GraphQLSchema {
  return target.entry.view.schema;
}
