import { request } from './api.ts';

/** Model definitions as the project's live config holds them (GET /v1/control/projects/:id/config). */
export type FieldType =
  | 'text'
  | 'richtext'
  | 'flexible'
  | 'number'
  | 'boolean'
  | 'date'
  | 'enum'
  | 'select'
  | 'reference'
  | 'model'
  | 'image'
  | 'video'
  | 'file'
  | 'list'
  | 'json';
export interface FieldDef {
  key: string;
  type: FieldType;
  label?: string;
  required?: boolean;
  placeholder?: string;
  queryable?: boolean;
  itemType?: FieldType;
  access?: { read?: string[]; write?: string[] };
  config?: {
    widget?: string;
    options?: { value: string; label: string }[];
    multiple?: boolean;
    default?: unknown;
    optionModelKey?: string;
    modelKey?: string;
    modelKeys?: string[];
    itemType?: FieldType;
    [k: string]: unknown;
  };
}
export interface ModelDef {
  key: string;
  name: string;
  fields: FieldDef[];
  versioned?: boolean;
  lookups?: { keyBy: string[] }[];
}
export interface Placement {
  type?: string;
  url: string;
  modelKeys?: string[];
  tabName?: string;
  hideContentTab?: boolean;
}
export interface ProjectConfig {
  name: string;
  project: { id: string; name: string; settings: Record<string, unknown> };
  models?: ModelDef[];
  placements?: Placement[];
  operations?: { key: string; name?: string; description?: string }[];
  schedules?: { key?: string; operationKey: string; cron: string; timezone?: string; enabled?: boolean }[];
}

const configs = new Map<string, Promise<ProjectConfig>>();
export function projectConfig(projectId: string, fresh = false): Promise<ProjectConfig> {
  let p = configs.get(projectId);
  if (!p || fresh) {
    p = request<ProjectConfig>(
      'GET',
      `/v1/control/projects/${encodeURIComponent(projectId)}/config`,
      undefined,
      projectId,
    );
    p.catch(() => configs.delete(projectId));
    configs.set(projectId, p);
  }
  return p;
}

/** GraphQL names generated from a model key (docs/graphql.md#naming). */
export function names(modelKey: string) {
  const safe = modelKey.replace(/[^A-Za-z0-9_]/g, '_');
  const type = safe.charAt(0).toUpperCase() + safe.slice(1);
  return {
    type,
    one: safe,
    list: `${safe}s`,
    search: `search${type}s`,
    create: `create${type}`,
    update: `update${type}`,
    publish: `publish${type}Version`,
    unpublish: `unpublish${type}`,
    remove: `delete${type}`,
    restore: `restore${type}Version`,
    schedulePublish: `schedule${type}Publish`,
    scheduleUnpublish: `schedule${type}Unpublish`,
    where: `${type}Where`,
    orderBy: `${type}OrderBy`,
    input: `${type}Input`,
  };
}

export const labelOf = (f: FieldDef): string => f.label || f.key;
export const TEXT_TYPES = new Set<FieldType>(['text', 'richtext']);

/** The field whose value titles a record in lists and pickers. */
export function titleField(m: ModelDef): FieldDef | undefined {
  return (
    m.fields.find((f) => f.type === 'text' && /^(title|name|label|heading)$/i.test(f.key)) ??
    m.fields.find((f) => f.type === 'text')
  );
}

export function recordTitle(
  m: ModelDef,
  r: { _id: string; naturalKey?: string | null; content?: Record<string, unknown> | null },
): string {
  const t = titleField(m);
  const v = t ? r.content?.[t.key] : undefined;
  return (typeof v === 'string' && v.trim()) || r.naturalKey || r._id;
}
