import type { DocumentPolicy, KeyPrincipal } from '../auth/principal.ts';
import { BadUserInput, DocumentNotTrusted, PersistedQueryNotFound } from '../errors.ts';
import type { ProjectActor, ProjectSnapshot } from '../projects/actor.ts';
import { apqGet, apqPut, DOCUMENT_LIMITS, sha256Hex } from '../documents/store.ts';
import type { Sql } from '../store/db.ts';
import { Lru, processCacheBudget } from './lru.ts';
import { prepareFor, prepareTrusted, type DocumentCaches, type Prepared } from './prepare.ts';

/**
 * Which document a GraphQL request runs under its key's document policy (docs/documents.md): its
 * text, a trusted document named by `documentId` / Apollo's persistedQuery hash, or a document of
 * the APQ store. The request path of trusted documents; pushing, validating and compiling them
 * ahead is graphql/trusted.ts.
 */

/** What a request names (the fields of execute.ts GraphqlRequest this reads). */
export interface NamedRequest {
  query: string;
  operationName?: string | null;
  documentId?: string | null;
  persisted?: boolean;
}

/** Where it runs (schema-entries.ts Target, the parts this reads). */
export interface DocumentTarget {
  actor: ProjectActor;
  snapshot: ProjectSnapshot;
}

/** The key's policy, else the project's `documentPolicy` setting, else `any`. */
export function documentPolicyOf(principal: KeyPrincipal, snapshot: ProjectSnapshot): DocumentPolicy {
  if (principal.documents) return principal.documents;
  const p = snapshot.settings.documentPolicy;
  return p === 'apq' || p === 'trusted-only' ? p : 'any';
}

/** What a request runs: the document text, and the trusted document's hash when it is one. */
export interface Resolved {
  query: string;
  trusted: string | null;
}

const NOT_TRUSTED =
  'This key runs trusted documents only: send "documentId": "sha256:<hash>" of a pushed document instead of its text';

/**
 * The document a request runs under its key's policy. Sync for text and trusted documents (the
 * hot path: one Map lookup); a promise only when the APQ store must be asked.
 */
export function resolveDocument(
  deps: { sql: Sql },
  target: DocumentTarget,
  principal: KeyPrincipal,
  req: NamedRequest,
): Resolved | Promise<Resolved> {
  const policy = documentPolicyOf(principal, target.snapshot);
  const hash = req.documentId;
  if (hash === undefined || hash === null) {
    if (policy === 'trusted-only') throw new DocumentNotTrusted(NOT_TRUSTED);
    if (typeof req.query !== 'string' || req.query.length === 0)
      throw new BadUserInput('The request needs a "query" string or a "documentId"');
    return { query: req.query, trusted: null };
  }
  const text = typeof req.query === 'string' && req.query.length > 0 ? req.query : null;
  // Apollo's wording: its clients look for it.
  if (text !== null && sha256Hex(text) !== hash) throw new BadUserInput('provided sha does not match query');
  const doc = target.snapshot.documents.get(hash);
  if (doc) {
    if (principal.keyId !== WARM_UP_KEY_ID) countHit(target.snapshot.id, hash);
    return { query: doc.body, trusted: hash };
  }
  if (policy === 'trusted-only') {
    if (text !== null) throw new DocumentNotTrusted(NOT_TRUSTED);
    throw new PersistedQueryNotFound('PersistedQueryNotFound', { documentId: `sha256:${hash}` });
  }
  if (text !== null) {
    if (policy === 'apq' && req.persisted) return registerApq(deps, target, hash, text);
    return { query: text, trusted: null };
  }
  if (policy !== 'apq') throw new PersistedQueryNotFound('PersistedQueryNotFound', { documentId: `sha256:${hash}` });
  return lookupApq(deps, target, hash);
}

/** The document a request runs, and its prepared form for the target's schema view. */
export interface RequestDocument {
  doc: Resolved;
  prepared: Prepared;
}

/**
 * The document step of an execution: which document (resolveDocument), then prepared for the
 * view (a memo lookup for a known document; a trusted one by hash, compiled ahead). Sync but for
 * the APQ store.
 */
export function requestDocument(
  deps: { sql: Sql },
  target: DocumentTarget & { entry: DocumentCaches },
  principal: KeyPrincipal,
  req: NamedRequest,
): RequestDocument | Promise<RequestDocument> {
  const found = resolveDocument(deps, target, principal, req);
  if (found instanceof Promise) return found.then((doc) => withPrepared(target, req, doc));
  return withPrepared(target, req, found);
}

function withPrepared(target: { entry: DocumentCaches }, req: NamedRequest, doc: Resolved): RequestDocument {
  const prepared = doc.trusted
    ? prepareTrusted(target, doc.trusted, doc.query, req.operationName ?? null)
    : prepareFor(target, doc.query === req.query ? req : { query: doc.query, operationName: req.operationName });
  return { doc, prepared };
}

/** Per project, APQ documents this process has seen: hash → text (bounded like every GraphQL cache). */
function apqCache(actor: ProjectActor): Lru<string, string> {
  let c = actor.derived.get('gql:apq') as Lru<string, string> | undefined;
  if (!c) {
    c = new Lru({
      kind: 'apq',
      maxEntries: 1_000,
      maxBytes: 2 * 1024 * 1024,
      sizeOf: (text, hash) => 2 * text.length + 2 * hash.length + 64,
      budget: processCacheBudget,
    });
    actor.derived.set('gql:apq', c);
  }
  return c;
}

export function apqMaxBytes(snapshot: ProjectSnapshot): number {
  const v = snapshot.settings.apqMaxBytes;
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
    ? Math.min(v, DOCUMENT_LIMITS.apqMaxBytes)
    : DOCUMENT_LIMITS.apqDefaultBytes;
}

async function registerApq(deps: { sql: Sql }, target: DocumentTarget, hash: string, text: string): Promise<Resolved> {
  const cache = apqCache(target.actor);
  if (cache.get(hash) === undefined) {
    await apqPut(deps.sql, target.snapshot.id, hash, text, apqMaxBytes(target.snapshot));
    cache.set(hash, text);
  }
  return { query: text, trusted: null };
}

async function lookupApq(deps: { sql: Sql }, target: DocumentTarget, hash: string): Promise<Resolved> {
  const cache = apqCache(target.actor);
  let text = cache.get(hash);
  if (text === undefined) {
    // Another process may have registered it: the store is shared, this cache is not.
    text = (await apqGet(deps.sql, target.snapshot.id, hash)) ?? undefined;
    if (text === undefined)
      throw new PersistedQueryNotFound('PersistedQueryNotFound', { documentId: `sha256:${hash}` });
    cache.set(hash, text);
  }
  return { query: text, trusted: null };
}

/** The key id of the start-up warm-up's requests (http/warmup.ts): no client's, never counted. */
export const WARM_UP_KEY_ID = 'warm-up';

/* ----------------------------------------------------------------------------------------------
 * Hits by document id for /metrics: at most MAX_LABELS distinct ids (the first seen), the rest
 * counted under `other`, so the label set stays bounded whatever is pushed.
 * -------------------------------------------------------------------------------------------- */
const MAX_LABELS = 200;
/** project → document hash → requests; `other` (both levels) past MAX_LABELS ids. */
const hits = new Map<string, Map<string, number>>();
let labels = 0;

function countHit(projectId: string, hash: string): void {
  let docs = hits.get(projectId);
  const n = docs?.get(hash);
  if (n !== undefined) return void docs!.set(hash, n + 1);
  if (labels >= MAX_LABELS) {
    docs = hits.get('other') ?? new Map<string, number>();
    hits.set('other', docs);
    docs.set('other', (docs.get('other') ?? 0) + 1);
    return;
  }
  if (!docs) hits.set(projectId, (docs = new Map()));
  docs.set(hash, 1);
  labels++;
}

/** [[project, document], count] for the `svc_trusted_document_hits_total` series. */
export function documentHits(): (readonly [readonly [string, string], number])[] {
  const out: (readonly [readonly [string, string], number])[] = [];
  for (const [project, docs] of hits)
    for (const [hash, n] of docs) out.push([[project, hash === 'other' ? 'other' : `sha256:${hash}`], n] as const);
  return out;
}
