import type { KeyPrincipal } from '../auth/principal.ts';
import { projectsWithTrusted } from '../documents/store.ts';
import type { GraphqlDeps } from './context.ts';
import { pluralField } from './context.ts';
import { WARM_UP_KEY_ID } from './document-policy.ts';
import { prepareTrusted } from './prepare.ts';
import { schemaEntryFor } from './schema-entries.ts';
import { keyViews } from './trusted.ts';

/**
 * The reads a process makes of itself at start-up, before its port opens (http/warmup.ts runs
 * them through the GraphQL handler): pushed trusted documents that are plain reads of a model's
 * records (one root field, `<model>` or `<model>s`, no variables: graphql/plan.ts), each as the
 * project's public key view would run it. Nothing else qualifies: a search may call an
 * embeddings provider, an operation an endpoint of the project's, and neither is run for a
 * warm-up. Documents with variables are left out too (no values to give them); they share the
 * request path the others warm.
 */
export interface WarmRead {
  /** A view of one of the project's keys, under the warm-up's own key id (never counted). */
  principal: KeyPrincipal;
  /** The POST body: the document by id. */
  body: string;
}

/** At most this many distinct reads (projects × documents); the warm-up cycles through them. */
const MAX_READS = 64;

export async function warmReads(deps: GraphqlDeps, maxProjects = 16): Promise<WarmRead[]> {
  const out: WarmRead[] = [];
  for (const id of await projectsWithTrusted(deps.sql, maxProjects)) {
    const actor = await deps.projects.get(id).catch(() => null);
    if (!actor || actor.snapshot.documents.size === 0) continue;
    const snapshot = actor.snapshot;
    const views = await keyViews(deps, snapshot);
    // The traffic a start meets first is public reads; a project with no public key, its newest key's view.
    const view = views.find((v) => v.kind === 'pk' || v.kind === 'pk_t') ?? views[0];
    if (!view) continue;
    const roots = new Set<string>();
    for (const m of snapshot.models) roots.add(m.key).add(pluralField(m.key));
    const target = { entry: schemaEntryFor(actor, snapshot, view) };
    for (const d of snapshot.documents.values()) {
      if (!d.valid) continue;
      const prepared = prepareTrusted(target, d.hash, d.body, null);
      if (!prepared.ok || !prepared.plan || !roots.has(prepared.plan.info.fieldName)) continue;
      out.push({
        principal: { ...view, keyId: WARM_UP_KEY_ID },
        body: JSON.stringify({ documentId: `sha256:${d.hash}` }),
      });
      if (out.length >= MAX_READS) return out;
    }
  }
  return out;
}
