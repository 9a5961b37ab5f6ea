import type { EventBus } from '../bus/bus.ts';
import type { ActorRegistry } from '../actors/registry.ts';
import type { ProjectActor } from '../projects/actor.ts';
import { fetchCapped, type EgressPolicy } from '../operations/egress.ts';

/**
 * The optional CDN purge hook (docs/graphql.md, "HTTP caching"): when a project's published
 * content may have changed (a record change, a schema or project change), POST the surrogate keys
 * its cached reads carry (`svc-p-<projectId>`, see http/graphql.ts) to the project's
 * `cache.purgeUrl`. Debounced per project (a burst of publishes is one purge); one POST at a
 * time per project, bounded by a timeout; a failing CDN is logged, never retried into a loop.
 * Sent under the operations' egress policy (src/operations/egress.ts: in production only public
 * addresses, each redirect hop checked), so a project cannot aim it at the service's network.
 * Every API process that hears the event purges: a purge is idempotent.
 */
const DEBOUNCE_MS = 200;
const TIMEOUT_MS = 5_000;

export function projectSurrogateKey(projectId: string): string {
  return `svc-p-${projectId}`;
}

export function installCdnPurge(
  bus: EventBus,
  projects: ActorRegistry<ProjectActor>,
  policy: EgressPolicy,
): () => void {
  const timers = new Map<string, ReturnType<typeof setTimeout>>();
  const purge = async (projectId: string) => {
    timers.delete(projectId);
    const snapshot = projects.peek(projectId)?.current;
    const url = (snapshot?.settings.cache as { purgeUrl?: unknown } | undefined)?.purgeUrl;
    if (typeof url !== 'string' || !/^https?:\/\//.test(url)) return;
    const keys = [projectSurrogateKey(projectId)];
    try {
      const res = await fetchCapped(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'surrogate-key': keys.join(' '), 'cache-tag': keys.join(',') },
        body: JSON.stringify({ surrogateKeys: keys, tags: keys }),
        signal: AbortSignal.timeout(TIMEOUT_MS),
        policy,
        maxBytes: 4_096,
      });
      if (res.status < 200 || res.status >= 300)
        console.error(`cdn purge for ${projectId}: the purge URL answered ${res.status}`);
    } catch (err) {
      console.error(`cdn purge for ${projectId} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const schedule = (projectId: string) => {
    if (timers.has(projectId) || !projects.peek(projectId)) return;
    timers.set(
      projectId,
      setTimeout(() => void purge(projectId), DEBOUNCE_MS),
    );
  };
  const off = bus.subscribe((e) => {
    if (e.type === 'record.changed' || e.type === 'schema.changed' || e.type === 'project.changed')
      schedule(e.projectId);
  });
  return () => {
    off();
    for (const t of timers.values()) clearTimeout(t);
    timers.clear();
  };
}
