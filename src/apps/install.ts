import type { Sql } from '../store/db.ts';
import type { EgressPolicy } from '../operations/egress.ts';
import {
  checkInstall,
  fetchManifest,
  ManifestError,
  validateManifest,
  type AppManifest,
  type InstallProblem,
  type ModelFields,
} from './manifest.ts';

/**
 * The app step of `svc push` (docs/apps.md), run before the push's transaction so no network
 * call holds it open: each app's manifest is fetched (at most FETCHES_AT_ONCE at a time) and
 * validated, and the installation checked against it, the project's models (the pushed ones, or
 * the live ones when the push has none) and the project's secrets. An app with a problem is
 * reported and not stored; its previous installation, if any, stays as it was.
 */
export interface AppFetchOptions {
  policy: EgressPolicy;
  /** Extra CA certificates (PEM) trusted for manifest URLs (`SVC_APPS_CA_FILE`). */
  ca?: string;
}

export interface PreparedApps {
  manifests: Map<string, AppManifest>;
  problems: InstallProblem[];
  /** Names of apps not stored by this push. */
  failed: string[];
}

type Obj = Record<string, unknown>;
const FETCHES_AT_ONCE = 4;

export async function prepareApps(
  sql: Sql,
  projectId: string,
  apps: Record<string, Obj>,
  pushedModels: readonly { key: string; fields?: { key: string }[] }[] | null,
  opts: AppFetchOptions,
): Promise<PreparedApps> {
  const models: ModelFields = pushedModels
    ? new Map(pushedModels.map((m) => [m.key, new Set((m.fields ?? []).map((f) => f.key))]))
    : new Map(
        (
          await sql<
            { key: string; definition: { fields?: { key: string }[] } }[]
          >`select key, definition from models where project_id = ${projectId}`
        ).map((r) => [r.key, new Set((r.definition.fields ?? []).map((f) => f.key))]),
      );
  const labels = new Set(
    (
      await sql<
        { label: string }[]
      >`select label from secrets where project_id = ${projectId} and owner_kind = 'project'`
    ).map((r) => r.label),
  );
  const out: PreparedApps = { manifests: new Map(), problems: [], failed: [] };
  const names = Object.keys(apps);
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++]!;
      const app = apps[name]!;
      try {
        const manifest = validateManifest(
          await fetchManifest(String(app.source), opts.policy, { ca: opts.ca }),
          String(app.source),
        );
        const problems = checkInstall(name, app, manifest, models, labels);
        if (problems.length) {
          out.problems.push(...problems);
          out.failed.push(name);
        } else out.manifests.set(name, manifest);
      } catch (err) {
        if (!(err instanceof ManifestError)) throw err;
        out.problems.push({ path: `apps.${name}.source`, message: err.message });
        out.failed.push(name);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FETCHES_AT_ONCE, names.length) }, worker));
  return out;
}
