import { BadUserInput } from '../errors.ts';
import type { FieldDef, FieldType, ModelDef } from '../projects/types.ts';
import { SYSTEM_FIELDS } from './types.ts';

/**
 * Checks and normalises the `data` of a write against the model, so every entry point
 * (typed mutations, batch operations with JSON data, the CLI) gets the same rules and the
 * same BAD_USER_INPUT messages naming the field. Dates are stored as full ISO-8601 UTC
 * strings so text ordering equals time ordering.
 */
export type ModelLookup = (key: string) => ModelDef | undefined;

const ASSET_SHAPES: Record<'image' | 'video' | 'file', Record<string, 'string' | 'number' | 'object'>> = {
  image: {
    fileId: 'string',
    url: 'string',
    alt: 'string',
    width: 'number',
    height: 'number',
    mimeType: 'string',
    focalPoint: 'object',
  },
  video: {
    fileId: 'string',
    url: 'string',
    poster: 'string',
    hlsUrl: 'string',
    duration: 'number',
    width: 'number',
    height: 'number',
    mimeType: 'string',
  },
  file: { fileId: 'string', url: 'string', name: 'string', mimeType: 'string', size: 'number' },
};

const FILE_ID = /^file_[0-9a-f]{24}$/;

/** A file a record field names: written records may only name live files of their project. */
export interface FileRef {
  field: string;
  fileId: string;
  /** `image/`, `video/`, or '' (any file). */
  typePrefix: string;
}

const PREFIX: Record<'image' | 'video' | 'file', string> = { image: 'image/', video: 'video/', file: '' };

/** The file ids of validated data (image, video and file fields, lists and inline models of them). */
export function fileRefs(
  model: ModelDef,
  data: Record<string, unknown>,
  models: ModelLookup,
  path = '',
  depth = 0,
): FileRef[] {
  const out: FileRef[] = [];
  if (depth > 8) return out;
  for (const f of model.fields) {
    const v = data[f.key];
    if (v === undefined || v === null) continue;
    const at = `${path}${f.key}`;
    const item = f.type === 'list' ? (f.itemType ?? (f.config?.itemType as FieldType | undefined) ?? 'json') : f.type;
    if (item === 'image' || item === 'video' || item === 'file') {
      const vals = f.type === 'list' && Array.isArray(v) ? v : [v];
      vals.forEach((x, i) => {
        if (isObject(x) && typeof x.fileId === 'string')
          out.push({ field: f.type === 'list' ? `${at}.${i}` : at, fileId: x.fileId, typePrefix: PREFIX[item] });
      });
    } else if (f.type === 'model' && isObject(v) && f.config?.modelKey) {
      const inline = models(f.config.modelKey);
      if (inline) out.push(...fileRefs(inline, v, models, `${at}.`, depth + 1));
    }
  }
  return out;
}

function fail(path: string, expected: string): never {
  throw new BadUserInput(`Invalid value for field "${path}": expected ${expected}`, { field: path });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function one(type: FieldType, field: FieldDef, v: unknown, path: string, models: ModelLookup, depth: number): unknown {
  switch (type) {
    case 'text':
      if (typeof v !== 'string') fail(path, 'a string');
      return v;
    case 'richtext':
      if (typeof v !== 'string' && !isObject(v) && !Array.isArray(v)) fail(path, 'a string or a rich-text document');
      return v;
    case 'number':
      if (typeof v !== 'number' || !Number.isFinite(v)) fail(path, 'a finite number');
      return v;
    case 'boolean':
      if (typeof v !== 'boolean') fail(path, 'a boolean');
      return v;
    case 'date': {
      if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}/.test(v)) fail(path, 'an ISO-8601 date');
      const t = Date.parse(v);
      if (Number.isNaN(t)) fail(path, 'an ISO-8601 date');
      return new Date(t).toISOString();
    }
    case 'enum': {
      const values = (field.config?.options ?? []).map((o) => o.value);
      if (typeof v !== 'string' || !values.includes(v)) fail(path, `one of ${values.join(', ')}`);
      return v;
    }
    case 'select':
    case 'reference':
      if (typeof v !== 'string' || v === '') fail(path, 'a record id');
      return v;
    case 'flexible': {
      if (!Array.isArray(v)) fail(path, 'a list of blocks');
      return v.map((b, i) => {
        if (!isObject(b) || typeof b.type !== 'string') fail(`${path}.${i}`, 'a block object with a string "type"');
        return b;
      });
    }
    case 'model': {
      if (!isObject(v)) fail(path, 'an object');
      const inline = field.config?.modelKey ? models(field.config.modelKey) : undefined;
      return inline && depth < 8 ? validateData(inline, v, models, { partial: true, path, depth: depth + 1 }) : v;
    }
    case 'image':
    case 'video':
    case 'file': {
      if (typeof v === 'string') v = { fileId: v };
      if (!isObject(v)) fail(path, `a ${type} object`);
      const shape = ASSET_SHAPES[type];
      for (const [k, val] of Object.entries(v)) {
        const want = shape[k];
        if (!want) fail(`${path}.${k}`, `one of the ${type} properties ${Object.keys(shape).join(', ')}`);
        if (val === null) continue;
        if (want === 'object') {
          if (!isObject(val) || typeof val.x !== 'number' || typeof val.y !== 'number')
            fail(`${path}.${k}`, 'an object { x, y }');
        } else if (typeof val !== want) fail(`${path}.${k}`, `a ${want}`);
      }
      if (v.fileId !== undefined && v.fileId !== null) {
        // An uploaded file (checked against the project's files by the write, src/content/write.ts).
        // The value is kept as written (clients reading `content` see their url); on read the
        // typed fields take url, size and dimensions from the file itself.
        if (typeof v.fileId !== 'string' || !FILE_ID.test(v.fileId)) fail(`${path}.fileId`, 'a file id (file_…)');
        if (
          isObject(v.focalPoint) &&
          [v.focalPoint.x, v.focalPoint.y].some((n) => typeof n !== 'number' || n < 0 || n > 1)
        )
          fail(`${path}.focalPoint`, 'an object { x, y } with each from 0 to 1');
      }
      return v;
    }
    case 'list': {
      if (!Array.isArray(v)) fail(path, 'a list');
      const inner = field.itemType ?? (field.config?.itemType as FieldType | undefined) ?? 'json';
      return v.map((item, i) =>
        item === null
          ? fail(`${path}.${i}`, 'a non-null item')
          : one(inner, field, item, `${path}.${i}`, models, depth),
      );
    }
    case 'json':
      return v;
  }
}

function value(field: FieldDef, v: unknown, path: string, models: ModelLookup, depth: number): unknown {
  if (v === null) return null;
  if ((field.type === 'enum' || field.type === 'select') && field.config?.multiple) {
    if (!Array.isArray(v)) fail(path, 'a list');
    return v.map((x, i) => one(field.type, field, x, `${path}.${i}`, models, depth));
  }
  return one(field.type, field, v, path, models, depth);
}

export interface ValidateOptions {
  /** Partial data (updates, inline models): absent fields are left out, not defaulted. */
  partial: boolean;
  path?: string;
  depth?: number;
}

/**
 * A model's fields by key, built once per field list rather than once per write (a Map of the
 * fields per validated record was ~2 % of the service's samples in the write bench;
 * docs/decisions.md, "Writes, session 5: service CPU per mutation"). Model definitions are not changed in place (a schema
 * change makes new ones); the length check is a guard all the same.
 */
const fieldMaps = new WeakMap<readonly FieldDef[], { n: number; byKey: Map<string, FieldDef> }>();
function fieldsByKey(model: ModelDef): Map<string, FieldDef> {
  const hit = fieldMaps.get(model.fields);
  if (hit && hit.n === model.fields.length) return hit.byKey;
  const byKey = new Map(model.fields.map((f) => [f.key, f]));
  fieldMaps.set(model.fields, { n: model.fields.length, byKey });
  return byKey;
}

export function validateData(
  model: ModelDef,
  data: unknown,
  models: ModelLookup,
  opts: ValidateOptions,
): Record<string, unknown> {
  const prefix = opts.path ? `${opts.path}.` : '';
  if (!isObject(data)) throw new BadUserInput(`Invalid value for "${opts.path ?? 'data'}": expected an object`);
  const byKey = fieldsByKey(model);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) {
    const f = byKey.get(k);
    if (!f || SYSTEM_FIELDS.has(k))
      throw new BadUserInput(`Unknown field "${prefix}${k}" for model ${model.key}`, { field: `${prefix}${k}` });
    if (v === undefined) continue;
    out[k] = value(f, v, `${prefix}${k}`, models, opts.depth ?? 0);
  }
  if (!opts.partial) {
    for (const f of model.fields) {
      if (out[f.key] === undefined && f.type === 'enum' && f.config?.default !== undefined)
        out[f.key] = f.config.default;
    }
  }
  return out;
}

/** Required fields must hold a value (not null, not an empty string or list). */
export function checkRequired(model: ModelDef, data: Record<string, unknown>): void {
  for (const f of model.fields) {
    if (!f.required) continue;
    const v = data[f.key];
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0)) {
      throw new BadUserInput(`Field "${f.key}" is required`, { field: f.key });
    }
  }
}

/** Plain text of a record for full-text search: every text-like value, depth-first. */
export function searchText(model: ModelDef, data: Record<string, unknown>): string {
  const parts: string[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (depth > 6 || v === null || v === undefined) return;
    if (typeof v === 'string') parts.push(v);
    else if (Array.isArray(v)) for (const x of v) walk(x, depth + 1);
    else if (isObject(v)) for (const x of Object.values(v)) walk(x, depth + 1);
  };
  for (const f of model.fields) {
    // One search vector serves every reader: fields with read restrictions stay out of it.
    if (f.access?.read) continue;
    if (
      f.type === 'text' ||
      f.type === 'richtext' ||
      f.type === 'flexible' ||
      (f.type === 'list' && (f.itemType ?? 'text') === 'text')
    )
      walk(data[f.key], 0);
  }
  return parts.join(' ').slice(0, 200_000);
}
