import { EgressError, fetchCapped, type EgressPolicy, type EgressResponse } from '../operations/egress.ts';

/**
 * App manifests (docs/apps.md): fetched from the app's https `source` at push time under the
 * operations' address rules (src/operations/egress.ts: every hop checked, production refuses
 * private addresses), with a timeout and a size cap, then validated. No database access here.
 */
export const MANIFEST_MAX_BYTES = 256 * 1024;
export const MANIFEST_TIMEOUT_MS = 5000;

export type SettingType = 'string' | 'number' | 'boolean' | 'secret';
const SETTING_TYPES: readonly SettingType[] = ['string', 'number', 'boolean', 'secret'];

export interface ManifestPlacement {
  type: string;
  url: string;
  modelKeys?: string[];
  tabName?: string;
  hideContentTab?: boolean;
}

export interface AppManifest {
  name: string;
  version?: string;
  description?: string;
  settings: Record<string, { type: SettingType; required?: boolean; label?: string }>;
  sources: Record<string, { fields: string[] }>;
  sinks: Record<string, { fields: string[] }>;
  placementFields: string[];
  placements: ManifestPlacement[];
}

export class ManifestError extends Error {}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v);
const NAME_RE = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

/** Fetches a manifest's JSON text: https only, JSON content type, at most MANIFEST_MAX_BYTES. */
export async function fetchManifest(
  source: string,
  policy: EgressPolicy,
  opts: { timeoutMs?: number; maxBytes?: number; ca?: string } = {},
): Promise<unknown> {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new ManifestError('source is not a valid URL');
  }
  if (url.protocol !== 'https:') throw new ManifestError('source must be an https URL');
  const maxBytes = opts.maxBytes ?? MANIFEST_MAX_BYTES;
  let res: EgressResponse;
  try {
    res = await fetchCapped(url.toString(), {
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': 'svc-apps' },
      signal: AbortSignal.timeout(opts.timeoutMs ?? MANIFEST_TIMEOUT_MS),
      policy,
      maxBytes,
      httpsOnly: true,
      ...(opts.ca ? { ca: opts.ca } : {}),
    });
  } catch (err) {
    if (err instanceof EgressError) throw new ManifestError(`fetching the manifest failed: ${err.message}`);
    if ((err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError')
      throw new ManifestError(`the manifest did not arrive within ${(opts.timeoutMs ?? MANIFEST_TIMEOUT_MS) / 1000} s`);
    throw new ManifestError(`fetching the manifest failed: ${(err as Error).message?.slice(0, 200) ?? 'unreachable'}`);
  }
  if (res.status !== 200) throw new ManifestError(`the manifest URL answered HTTP ${res.status}`);
  if (res.truncated) throw new ManifestError(`the manifest is larger than ${Math.round(maxBytes / 1024)} KB`);
  const type = (res.contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !type.endsWith('+json'))
    throw new ManifestError(`the manifest must be JSON (application/json), not ${type || 'an untyped body'}`);
  try {
    return JSON.parse(res.body);
  } catch {
    throw new ManifestError('the manifest is not valid JSON');
  }
}

function names(v: unknown, what: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && NAME_RE.test(x)))
    throw new ManifestError(`${what} must be a list of field names (letters, digits, _ and -)`);
  return v as string[];
}

function fieldSets(v: unknown, what: string): Record<string, { fields: string[] }> {
  if (v === undefined) return {};
  if (!isObj(v)) throw new ManifestError(`${what} must be an object of { fields: [...] }`);
  const out: Record<string, { fields: string[] }> = {};
  for (const [k, s] of Object.entries(v)) {
    if (!NAME_RE.test(k)) throw new ManifestError(`${what}: "${k.slice(0, 40)}" is not a valid name`);
    if (!isObj(s)) throw new ManifestError(`${what}.${k} must be an object with fields`);
    out[k] = { fields: names(s.fields, `${what}.${k}.fields`) };
  }
  return out;
}

/** Checks a fetched manifest's shape; relative placement URLs are resolved against `source`. */
export function validateManifest(v: unknown, source: string): AppManifest {
  if (!isObj(v)) throw new ManifestError('the manifest must be a JSON object');
  if (typeof v.name !== 'string' || v.name.trim() === '' || v.name.length > 200)
    throw new ManifestError('the manifest needs a name (1 to 200 characters)');
  for (const k of ['version', 'description'] as const) {
    if (v[k] !== undefined && (typeof v[k] !== 'string' || (v[k] as string).length > 2000))
      throw new ManifestError(`the manifest's ${k} must be a string`);
  }
  const settings: AppManifest['settings'] = {};
  if (v.settings !== undefined) {
    if (!isObj(v.settings))
      throw new ManifestError("the manifest's settings must be an object of { type, required, label }");
    for (const [k, s] of Object.entries(v.settings)) {
      if (!NAME_RE.test(k)) throw new ManifestError(`settings: "${k.slice(0, 40)}" is not a valid name`);
      if (!isObj(s) || !SETTING_TYPES.includes(s.type as SettingType))
        throw new ManifestError(`settings.${k}.type must be one of ${SETTING_TYPES.join(', ')}`);
      settings[k] = {
        type: s.type as SettingType,
        ...(s.required === true ? { required: true } : {}),
        ...(typeof s.label === 'string' ? { label: s.label.slice(0, 200) } : {}),
      };
    }
  }
  const placements: ManifestPlacement[] = [];
  if (v.placements !== undefined) {
    if (!Array.isArray(v.placements) || v.placements.length > 50)
      throw new ManifestError("the manifest's placements must be a list (at most 50)");
    for (const [i, p] of v.placements.entries()) {
      if (!isObj(p) || typeof p.type !== 'string' || typeof p.url !== 'string')
        throw new ManifestError(`placements[${i}] needs a type and a url`);
      let url: URL;
      try {
        url = new URL(p.url, source);
      } catch {
        throw new ManifestError(`placements[${i}].url is not a valid URL`);
      }
      if (url.protocol !== 'https:') throw new ManifestError(`placements[${i}].url must be https`);
      placements.push({
        type: p.type.slice(0, 100),
        url: url.toString(),
        ...(p.modelKeys !== undefined ? { modelKeys: names(p.modelKeys, `placements[${i}].modelKeys`) } : {}),
        ...(typeof p.tabName === 'string' ? { tabName: p.tabName.slice(0, 200) } : {}),
        ...(typeof p.hideContentTab === 'boolean' ? { hideContentTab: p.hideContentTab } : {}),
      });
    }
  }
  return {
    name: v.name.trim(),
    ...(typeof v.version === 'string' ? { version: v.version } : {}),
    ...(typeof v.description === 'string' ? { description: v.description } : {}),
    settings,
    sources: fieldSets(v.sources, 'sources'),
    sinks: fieldSets(v.sinks, 'sinks'),
    placementFields: names(v.placementFields, 'placementFields'),
    placements,
  };
}

/** The model shapes an installation is checked against: field keys by model key. */
export type ModelFields = ReadonlyMap<string, ReadonlySet<string>>;

export interface InstallProblem {
  path: string;
  message: string;
}

/**
 * Checks an installation (`apps.<name>` of the config) against its manifest and the project's
 * models: settings declared and typed, `secret` settings naming an existing project secret,
 * mapping names and app fields declared by the manifest, model fields existing.
 */
export function checkInstall(
  name: string,
  app: Obj,
  manifest: AppManifest,
  models: ModelFields,
  secretLabels: ReadonlySet<string>,
): InstallProblem[] {
  const out: InstallProblem[] = [];
  const p = `apps.${name}`;
  const settings = isObj(app.settings) ? app.settings : {};
  for (const [k, v] of Object.entries(settings)) {
    const decl = manifest.settings[k];
    if (!decl) {
      out.push({ path: `${p}.settings.${k}`, message: `the app's manifest declares no setting "${k}"` });
      continue;
    }
    const ok = decl.type === 'secret' || decl.type === 'string' ? typeof v === 'string' : typeof v === decl.type;
    if (!ok)
      out.push({
        path: `${p}.settings.${k}`,
        message: `must be a ${decl.type === 'secret' ? 'secret label' : decl.type}`,
      });
    else if (decl.type === 'secret' && !secretLabels.has(v as string)) {
      out.push({
        path: `${p}.settings.${k}`,
        message: `names the secret "${String(v).slice(0, 128)}", which this project does not have (svc secrets push or putSecret)`,
      });
    }
  }
  for (const [k, decl] of Object.entries(manifest.settings)) {
    if (decl.required && settings[k] === undefined)
      out.push({ path: `${p}.settings.${k}`, message: `the app requires the setting "${k}"` });
  }
  const mappings = isObj(app.mappings) ? app.mappings : {};
  for (const kind of ['sources', 'sinks'] as const) {
    const map = isObj(mappings[kind]) ? (mappings[kind] as Obj) : {};
    for (const [m, entry] of Object.entries(map)) {
      const mp = `${p}.mappings.${kind}.${m}`;
      const declared = manifest[kind][m];
      if (!declared) {
        out.push({
          path: mp,
          message: `the app's manifest declares no ${kind === 'sources' ? 'source' : 'sink'} "${m}"`,
        });
        continue;
      }
      if (!isObj(entry)) continue;
      const model = typeof entry.toModel === 'string' ? models.get(entry.toModel) : undefined;
      if (!model) {
        out.push({
          path: `${mp}.toModel`,
          message: `"${String(entry.toModel).slice(0, 64)}" is not a model of this project`,
        });
        continue;
      }
      // naturalKey names the app field whose value becomes the record's natural key.
      if (typeof entry.naturalKey === 'string' && !declared.fields.includes(entry.naturalKey)) {
        out.push({
          path: `${mp}.naturalKey`,
          message: `the app's ${m} has no field "${entry.naturalKey.slice(0, 64)}" to use as the natural key`,
        });
      }
      const fields = isObj(entry.fields) ? entry.fields : {};
      for (const [appField, modelField] of Object.entries(fields)) {
        if (!declared.fields.includes(appField))
          out.push({ path: `${mp}.fields.${appField}`, message: `the app's ${m} has no field "${appField}"` });
        else if (typeof modelField === 'string' && !model.has(modelField))
          out.push({
            path: `${mp}.fields.${appField}`,
            message: `"${modelField.slice(0, 64)}" is not a field of ${entry.toModel}`,
          });
      }
    }
  }
  const pf = isObj(mappings.placementFields) ? mappings.placementFields : {};
  for (const [k, entry] of Object.entries(pf)) {
    const fp = `${p}.mappings.placementFields.${k}`;
    if (!manifest.placementFields.includes(k)) {
      out.push({ path: fp, message: `the app's manifest declares no placement field "${k}"` });
      continue;
    }
    if (!isObj(entry)) continue;
    const model = typeof entry.model === 'string' ? models.get(entry.model) : undefined;
    if (!model)
      out.push({
        path: `${fp}.model`,
        message: `"${String(entry.model).slice(0, 64)}" is not a model of this project`,
      });
    else if (typeof entry.field !== 'string' || !model.has(entry.field))
      out.push({
        path: `${fp}.field`,
        message: `"${String(entry.field).slice(0, 64)}" is not a field of ${entry.model}`,
      });
  }
  return out;
}
