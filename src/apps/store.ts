import type { Sql } from '../store/db.ts';

/**
 * What an editor UI shows (docs/apps.md): the installed apps with their validated manifests, and
 * the placements (custom editor panels) for a model — the config's `placements[]` and those the
 * apps' manifests bring. Settings are returned as pushed: `secret` settings hold secret labels,
 * never values.
 */
export interface InstalledApp {
  name: string;
  source: string;
  settings: Record<string, unknown>;
  mappings: Record<string, unknown>;
  manifest: Record<string, unknown> | null;
  updatedAt: Date;
}

export async function listApps(sql: Sql, projectId: string): Promise<InstalledApp[]> {
  const rows = await sql<
    {
      key: string;
      source: string;
      definition: Record<string, unknown>;
      manifest: Record<string, unknown> | null;
      updated_at: Date;
    }[]
  >`
    select key, source, definition, manifest, updated_at from apps where project_id = ${projectId} order by position, key`;
  return rows.map((r) => ({
    name: r.key,
    source: r.source,
    settings: (r.definition.settings as Record<string, unknown>) ?? {},
    mappings: (r.definition.mappings as Record<string, unknown>) ?? {},
    manifest: r.manifest,
    updatedAt: r.updated_at,
  }));
}

export interface PlacementView {
  type: string;
  url: string;
  modelKeys: string[];
  tabName: string | null;
  hideContentTab: boolean;
  /** The app whose manifest brings it; null for the config's own placements. */
  app: string | null;
}

type Obj = Record<string, unknown>;

function view(d: Obj, app: string | null): PlacementView {
  return {
    type: String(d.type),
    url: String(d.url),
    modelKeys: Array.isArray(d.modelKeys) ? (d.modelKeys as string[]) : [],
    tabName: typeof d.tabName === 'string' ? d.tabName : null,
    hideContentTab: d.hideContentTab === true,
    app,
  };
}

/** Placements for a model (a placement without modelKeys shows on every model), or all of them. */
export async function listPlacements(sql: Sql, projectId: string, modelKey: string | null): Promise<PlacementView[]> {
  const own = await sql<
    { definition: Obj }[]
  >`select definition from placements where project_id = ${projectId} order by position, key`;
  const apps = await sql<
    { key: string; manifest: Obj | null }[]
  >`select key, manifest from apps where project_id = ${projectId} and manifest is not null order by position, key`;
  const all = [
    ...own.map((r) => view(r.definition, null)),
    ...apps.flatMap((a) =>
      Array.isArray(a.manifest?.placements) ? (a.manifest!.placements as Obj[]).map((p) => view(p, a.key)) : [],
    ),
  ];
  return modelKey === null ? all : all.filter((p) => p.modelKeys.length === 0 || p.modelKeys.includes(modelKey));
}
