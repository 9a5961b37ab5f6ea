import type { KeyPrincipal } from '../auth/principal.ts';
import { fingerprintOf } from '../auth/resolve.ts';
import { BASE_SCOPES } from '../auth/scopes.ts';
import { NotFound } from '../errors.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
import {
  checkManifest,
  entryPath,
  HASH_RE,
  listTrusted,
  projectsWithTrusted,
  removeTrusted,
  saveTrusted,
  setValidity,
  type DocumentProblem,
  type ListedDocument,
  type TrustedDocument,
} from '../documents/store.ts';
import type { GraphqlDeps } from './context.ts';
import { checkDocument, prepareTrusted } from './prepare.ts';
import { schemaEntryFor, type Target } from './schema-entries.ts';
import { buildSchema } from './schema.ts';

/**
 * Trusted documents on the GraphQL side (docs/documents.md): validating documents against a
 * project's schema, pushing, listing and removing them, and compiling them ahead — at push and at start-up, per key schema view that
 * may run them — so the first request naming one finds it compiled. Storage is src/documents; which document a
 * request runs, under its key's policy, is graphql/document-policy.ts.
 */

/* ----------------------------------------------------------------------------------------------
 * Validation against the project's schema: the widest view (a secret key with every scope), so a
 * document any key of the project could run is accepted; a key whose view lacks a field it
 * selects gets the usual validation error for that key at run time.
 * -------------------------------------------------------------------------------------------- */
const widest = new WeakMap<ProjectSnapshot, ReturnType<typeof buildSchema>>();

function widestView(snapshot: ProjectSnapshot) {
  let view = widest.get(snapshot);
  if (!view) {
    const base = {
      kind: 'sk' as const,
      scopes: new Set<string>(BASE_SCOPES) as ReadonlySet<string>,
      allowedModels: null,
    };
    view = buildSchema(snapshot, {
      keyId: 'trusted-documents',
      tenantId: snapshot.tenantId,
      projectId: snapshot.id,
      allowedFileTypes: null,
      ...base,
      fingerprint: fingerprintOf(base),
    });
    widest.set(snapshot, view);
  }
  return view;
}

/** null when the document validates against the project's schema, else the first problem. */
export function validateAgainst(snapshot: ProjectSnapshot, text: string): string | null {
  const errors = checkDocument(widestView(snapshot), text);
  return errors.length
    ? errors
        .map((e) => e.message)
        .slice(0, 3)
        .join('; ')
    : null;
}

/** What `svc documents push` (and a config's `documents`) report. */
export interface DocumentsPushed {
  projectId: string;
  applied: { documents: number };
  errors: DocumentProblem[];
}

/**
 * Checks, validates and stores a manifest's documents; invalid ones are listed and not stored.
 * Every process hears `project.changed`, reloads the project's trusted set and compiles it.
 */
export async function pushDocuments(
  deps: GraphqlDeps,
  projectId: string,
  manifest: unknown,
  replace = false,
): Promise<DocumentsPushed> {
  const actor = await deps.projects.get(projectId);
  const snapshot = actor.snapshot;
  const { entries, problems } = checkManifest(manifest);
  const good: TrustedDocument[] = [];
  for (const e of entries) {
    const problem = validateAgainst(snapshot, e.body);
    if (problem)
      problems.push({ path: entryPath(e.hash), message: `does not validate against the project's schema: ${problem}` });
    else good.push({ hash: e.hash, body: e.body, valid: true, problem: null });
    await yieldTurn();
  }
  const saved = await saveTrusted(deps.sql, projectId, good, replace && problems.length === 0);
  await deps.bus.publish({ type: 'project.changed', projectId });
  await actor.reload();
  await warmProject(deps, projectId);
  return { projectId, applied: { documents: saved.stored }, errors: [...problems, ...saved.problems] };
}

/**
 * After a schema push: validates every stored trusted document against the new schema, records
 * the outcome (`svc documents list` shows it) and returns a push error for each that no longer
 * validates. Such a document stays stored and is refused at run time with
 * GRAPHQL_VALIDATION_FAILED naming it, until it is removed or the schema takes it again.
 */
export async function revalidateDocuments(deps: GraphqlDeps, projectId: string): Promise<DocumentProblem[]> {
  const actor = await deps.projects.get(projectId);
  await actor.reload();
  const snapshot = actor.snapshot;
  const results: { hash: string; valid: boolean; problem: string | null }[] = [];
  const errors: DocumentProblem[] = [];
  for (const d of snapshot.documents.values()) {
    const problem = validateAgainst(snapshot, d.body);
    if (problem)
      errors.push({ path: entryPath(d.hash), message: `no longer validates against the project's schema: ${problem}` });
    if ((problem === null) !== d.valid || problem !== d.problem)
      results.push({ hash: d.hash, valid: problem === null, problem });
    await yieldTurn();
  }
  if (results.length) {
    await setValidity(deps.sql, projectId, results);
    await deps.bus.publish({ type: 'project.changed', projectId });
    await actor.reload();
  }
  return errors;
}

export async function listDocuments(
  deps: Pick<GraphqlDeps, 'sql'>,
  projectId: string,
): Promise<{ documents: ListedDocument[] }> {
  return { documents: await listTrusted(deps.sql, projectId) };
}

export async function removeDocument(
  deps: GraphqlDeps,
  projectId: string,
  id: string,
): Promise<{ hash: string; removed: true }> {
  const hash = id.startsWith('sha256:') ? id.slice(7) : id;
  if (!HASH_RE.test(hash) || !(await removeTrusted(deps.sql, projectId, hash)))
    throw new NotFound('No such trusted document');
  await deps.bus.publish({ type: 'project.changed', projectId });
  return { hash, removed: true };
}

/* ----------------------------------------------------------------------------------------------
 * Compiling ahead. The views that may run a project's documents are those of its live keys
 * (project keys and tenant keys listing it), at most MAX_VIEWS distinct ones; views of customers
 * who may write (rare) compile on first use. Each document yields the event loop once.
 * -------------------------------------------------------------------------------------------- */
const MAX_VIEWS = 32;
/** Compiles one warm-up may do for a project (views × documents × names); the rest compile on first use. */
const MAX_WARM = 4_000;

function yieldTurn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

export async function keyViews(deps: Pick<GraphqlDeps, 'sql'>, snapshot: ProjectSnapshot): Promise<KeyPrincipal[]> {
  const rows = await deps.sql<
    { id: string; kind: KeyPrincipal['kind']; scopes: string[]; allowed_models: string[] | null }[]
  >`
    select id, kind, scopes, allowed_models from api_keys
    where deleted_at is null and disabled_at is null and (expires_at is null or expires_at > now())
      and (project_id = ${snapshot.id} or ${snapshot.id} = any(project_ids))
    order by created_at desc limit 500`;
  const views = new Map<string, KeyPrincipal>();
  for (const r of rows) {
    const base = { kind: r.kind, scopes: new Set(r.scopes) as ReadonlySet<string>, allowedModels: r.allowed_models };
    const fingerprint = fingerprintOf(base);
    if (!views.has(fingerprint) && views.size < MAX_VIEWS) {
      views.set(fingerprint, {
        keyId: r.id,
        tenantId: snapshot.tenantId,
        projectId: snapshot.id,
        allowedFileTypes: null,
        ...base,
        fingerprint,
      });
    }
  }
  return [...views.values()];
}

/** Compiles every trusted document of a project for every key view that may run it. */
export async function warmProject(deps: GraphqlDeps, projectId: string): Promise<number> {
  const actor = await deps.projects.get(projectId);
  const snapshot = actor.snapshot;
  if (snapshot.documents.size === 0) return 0;
  let compiled = 0;
  for (const principal of await keyViews(deps, snapshot)) {
    const target: Target = { actor, snapshot, entry: schemaEntryFor(actor, snapshot, principal) };
    for (const d of snapshot.documents.values()) {
      if (!d.valid) continue;
      for (const name of operationNames(d.body)) {
        if (compiled >= MAX_WARM) return compiled;
        prepareTrusted(target, d.hash, d.body, name);
        compiled++;
      }
      await yieldTurn();
    }
  }
  return compiled;
}

/**
 * The operation names a request may pick in a document: none (a single operation) and, for
 * documents with several, each name. Found by a scan, not a parse: a wrong guess costs a
 * compile at first use, nothing more.
 */
function operationNames(text: string): (string | null)[] {
  const names = [...text.matchAll(/(?:^|[\s},])(?:query|mutation|subscription)\s+([_A-Za-z][_0-9A-Za-z]*)/g)].map(
    (m) => m[1]!,
  );
  return names.length > 1 ? [null, ...names.slice(0, 20)] : [null];
}

/**
 * At start-up: compiles the trusted documents of projects that have some (at most `maxProjects`,
 * most recently pushed first) within `budgetMs`; what is left compiles in the background.
 */
export async function warmAll(
  deps: GraphqlDeps,
  opts: { maxProjects?: number; budgetMs?: number } = {},
): Promise<void> {
  const projects = await projectsWithTrusted(deps.sql, opts.maxProjects ?? 1_000);
  const work = (async () => {
    for (const id of projects) await warmProject(deps, id).catch(() => 0);
  })();
  await Promise.race([work, new Promise((r) => setTimeout(r, opts.budgetMs ?? 10_000).unref?.())]);
}

/**
 * Every process compiles a project's documents again when it hears that they (or the schema)
 * changed: after the project reloaded, once per burst of events.
 */
export function installDocumentWarming(deps: GraphqlDeps): () => void {
  return deps.bus.subscribe((e) => {
    if (e.type !== 'project.changed' && e.type !== 'schema.changed') return;
    const actor = deps.projects.peek(e.projectId);
    if (!actor) return;
    // Queued behind the reload the same event asked for (the project's mailbox is ordered);
    // documents compiled already are cache hits.
    void actor
      .run(() => undefined)
      .then(() => warmProject(deps, e.projectId))
      .catch(() => 0);
  });
}
