import type { ExecutionResult } from 'graphql';
import { createHash } from 'node:crypto';
import type { EventBus } from '../bus/bus.ts';
import type { ActorRegistry } from '../actors/registry.ts';
import type { ProjectActor, ProjectSnapshot } from '../projects/actor.ts';
import { Lru, processCacheBudget } from './lru.ts';

/**
 * The response cache of the GraphQL core (execute.ts): per project, published key-only reads,
 * kept in ProjectActor.derived and emptied by every record, schema, project or file change of the
 * project heard on the bus (from any process), and by a bus reconnect.
 */
/** The core's answer to one operation. */
export interface Executed {
  /** Errors unmasked: the transport masks them (maskErrors) before they leave. */
  readonly result: ExecutionResult;
  /** Refused before execution (parse, validation, limits, unknown operation): HTTP answers 400. */
  readonly rejected: boolean;
  /** `public, max-age=…` for a shareable read, else `private, no-store` or `no-store`. */
  readonly cacheControl: string;
  /** JSON text of a result without errors (graphql-jit's serializer, or a cache hit): send as is. */
  readonly body: string | undefined;
}

/** max-age of a shareable published read (and of other published, cache-headed answers). */
export const CACHE_MAX_AGE = 30;
const RESPONSES_PER_PROJECT = 2000;
const RESPONSE_CACHE_BYTES = 32 * 1024 * 1024;
/** Larger bodies are answered but not kept. */
export const MAX_CACHED_BODY = 512 * 1024;
const RESPONSES = 'gql:responses';

export interface ResponseCache {
  /** Bumped on every invalidation: an execution that started before must not store its result. */
  gen: number;
  entries: Lru<string, Executed>;
}

/**
 * Cache keys are SHA-256 digests of what identifies an entry: a key never holds the document or
 * the variables (a 0.9 MB document used to be kept three times, twice as keys).
 */
export function digest(...parts: string[]): string {
  // One update of the joined text hashes the same bytes (each part, then NUL) as an update per
  // part, at half the cost: 0.39 against 0.81 µs for a document's key (Bun 1.4, this box).
  return createHash('sha256')
    .update(`${parts.join('\0')}\0`)
    .digest('base64url');
}

/**
 * The key of a document in a schema's prepared-document cache: the digest of operation name and
 * text, remembered by text for documents up to 4 KB (a client sends the same few documents over
 * and over). A lookup of the text is ~0.1 µs against ~0.4–0.8 µs for the SHA-256, and the digest
 * was 5 % of a mutation's samples (docs/decisions.md, "Writes, session 5: service CPU per
 * mutation"). An Lru charged to the process's cache budget like the other GraphQL caches (shown
 * in /metrics as `document-keys`).
 */
const DOCUMENT_KEY_CHARS = 4_096;
const documentKeys = new Lru<string, string>({
  kind: 'document-keys',
  maxEntries: 4_096,
  maxBytes: 2 * 1024 * 1024,
  sizeOf: (hash, text) => 2 * text.length + 2 * hash.length + 64,
  budget: processCacheBudget,
});

export function documentKey(operationName: string, query: string): string {
  if (query.length > DOCUMENT_KEY_CHARS) return digest(operationName, query);
  const text = `${operationName}\0${query}`;
  let key = documentKeys.get(text);
  if (key === undefined) {
    key = digest(operationName, query);
    documentKeys.set(text, key);
  }
  return key;
}

export function responseCache(actor: ProjectActor): ResponseCache {
  let rc = actor.derived.get(RESPONSES) as ResponseCache | undefined;
  if (!rc) {
    rc = {
      gen: 0,
      entries: new Lru({
        kind: 'responses',
        maxEntries: RESPONSES_PER_PROJECT,
        maxBytes: RESPONSE_CACHE_BYTES,
        sizeOf: (e) => 2 * (e.body?.length ?? 0) + 512,
        budget: processCacheBudget,
      }),
    };
    actor.derived.set(RESPONSES, rc);
  }
  return rc;
}

/**
 * Record, schema and project changes (from any process) empty that project's response cache.
 * Installed once by the Service, so every process that serves GraphQL gets it.
 */
export function installResponseInvalidation(bus: EventBus, projects: ActorRegistry<ProjectActor>): () => void {
  const drop = (projectId: string) => {
    const rc = projects.peek(projectId)?.derived.get(RESPONSES) as ResponseCache | undefined;
    if (rc) {
      rc.gen++;
      rc.entries.clear();
    }
  };
  const off = bus.subscribe((e) => {
    // A file deleted, restored or processed changes what records naming it resolve to.
    if (
      e.type === 'record.changed' ||
      e.type === 'schema.changed' ||
      e.type === 'project.changed' ||
      (e.type === 'custom' && e.topic === 'files.changed')
    )
      drop(e.projectId);
    else if (e.type === 'fleet.published') {
      for (const projectId of projects.keys())
        if (projects.peek(projectId)?.current?.fleetGroupId === e.groupId) drop(projectId);
    }
  });
  // Changes made while the listener was away were never heard: every cached response may be stale.
  const offReconnect = bus.onReconnect(() => {
    for (const projectId of projects.keys()) drop(projectId);
  });
  return () => {
    off();
    offReconnect();
  };
}

/** A response-cache entry: the body as stored; the result object only if a transport asks. */
export function stored(body: string, cacheControl: string): Executed {
  let parsed: ExecutionResult | undefined;
  return {
    rejected: false,
    cacheControl,
    body,
    get result() {
      return (parsed ??= JSON.parse(body) as ExecutionResult);
    },
  };
}

/**
 * The response key of a read without variables, remembered per prepared document (one per view,
 * document and operation name) with what it was made of, checked part by part on use: a hot
 * read then builds no key string and hashes nothing. `source` is the trusted document's hash or
 * the text (compared by content: a request's text is a new string each time). A SHA-256 of the
 * text per hit was ~8 % of a cached text read's server CPU; the trusted key's ~120-character
 * string ~0.2 µs (bench/NOTES.md, issue 31).
 */
const knownKeys = new WeakMap<
  object,
  { fingerprint: string; trusted: boolean; source: string; op: string; key: string }
>();

/** What a response key is made of: the request's operation and variables, and the document it resolved to. */
export interface KeyedRead {
  operationName?: string | null;
  variables?: Record<string, unknown> | null;
}

/**
 * The response-cache key of a read by a key of `fingerprint`: the document (its text, or the
 * trusted document's hash), operation name and variables. A trusted document without variables
 * needs no SHA-256 at all (fingerprint, hash and operation name: ~120 characters, never the
 * document); anything else is a digest, so a key never holds a document or variables.
 */
export function responseKey(
  fingerprint: string,
  req: KeyedRead,
  doc: { query: string; trusted: string | null },
  prepared?: object,
): string {
  if (!req.variables) {
    const op = req.operationName ?? '';
    const trusted = !!doc.trusted;
    const source = trusted ? doc.trusted! : doc.query;
    const known = prepared ? knownKeys.get(prepared) : undefined;
    if (
      known &&
      known.fingerprint === fingerprint &&
      known.trusted === trusted &&
      known.op === op &&
      known.source === source
    )
      return known.key;
    // A trusted document's key needs no digest: fingerprint, hash and name (never the document).
    const key = trusted ? `t\0${fingerprint}\0${source}\0${op}` : digest(fingerprint, op, source, '', '');
    if (prepared) knownKeys.set(prepared, { fingerprint, trusted, source, op, key });
    return key;
  }
  return digest(
    fingerprint,
    req.operationName ?? '',
    doc.trusted ?? doc.query,
    doc.trusted ? '\u0001' : '',
    JSON.stringify(req.variables),
  );
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
