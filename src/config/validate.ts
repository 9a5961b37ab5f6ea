import { FIELD_TYPES, PRINCIPALS } from '../projects/types.ts';
import { Checker, KEY_RE, isHttpUrl, join, type Obj } from './check.ts';
import type { ApplyConfigInput, ConfigError } from './types.ts';
import { checkCollections } from './validate-collections.ts';
import { checkDesignTokens } from './validate-tokens.ts';

/**
 * Validates a whole config (spec "Project configuration file") and returns every error at
 * once. Nothing is applied unless this returns no errors. Unknown fields pass through.
 * Warnings name what applies but will not work yet (they never stop a push).
 */
export function validateConfig(input: unknown): {
  config: ApplyConfigInput | null;
  errors: ConfigError[];
  warnings: ConfigError[];
} {
  const c = new Checker();
  if (!c.isObject(input)) {
    c.add('', 'the config must be an object (export default defineConfig({...}))');
    return { config: null, errors: c.errors, warnings: c.warnings };
  }
  checkNul(c, input);
  c.string(input, 'key', '', { required: true, max: 200 });
  c.string(input, 'name', '', { required: true, max: 200 });
  c.string(input, 'configType', '');
  c.boolean(input, 'force', '');
  const base = c.string(input, 'operationBaseUrl', '');
  if (base !== null && !isHttpUrl(base)) c.add('operationBaseUrl', 'operationBaseUrl must be an absolute http(s) URL');
  checkProject(c, input.project);
  const modelKeys = checkModels(c, input.models);
  checkCollections(c, input, modelKeys, base !== null);
  if (input.designTokens !== undefined) checkDesignTokens(c, input.designTokens);
  return { config: c.errors.length === 0 ? (input as ApplyConfigInput) : null, errors: c.errors, warnings: c.warnings };
}

/** A UTF-16 surrogate without its pair: JSON may carry it, PostgreSQL's jsonb refuses it. */
export const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * PostgreSQL text and jsonb cannot hold U+0000 nor a lone surrogate: either anywhere in the config (values or
 * names) is the client's mistake, reported at its path, never a driver error at apply time.
 * Iterative, so a deeply nested config cannot exhaust the stack.
 */
function checkNul(c: Checker, input: unknown): void {
  const stack: [unknown, string][] = [[input, '']];
  let reported = 0;
  while (stack.length > 0 && reported < 20) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (v.includes('\u0000')) c.add(path, 'must not contain NUL (U+0000) characters'), reported++;
      else if (LONE_SURROGATE.test(v))
        c.add(path, 'must be well-formed Unicode (a lone surrogate cannot be stored)'), reported++;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (typeof v === 'object' && v !== null) {
      for (const [k, child] of Object.entries(v)) {
        if (k.includes('\u0000')) c.add(path, 'field names must not contain NUL (U+0000) characters'), reported++;
        else if (LONE_SURROGATE.test(k))
          c.add(path, 'field names must be well-formed Unicode (a lone surrogate cannot be stored)'), reported++;
        stack.push([child, path ? `${path}.${k}` : k]);
      }
    }
  }
}

const SETTING_STRINGS = ['displayName', 'logoUrl', 'fromName', 'replyTo', 'supportEmail', 'appBaseUrl'];
const SETTING_BOOLEANS = [
  'customerWelcomeEmailEnabled',
  'customerSignupEnabled',
  'customerPasswordEnabled',
  'customerOtpEnabled',
];
const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

function checkProject(c: Checker, v: unknown): void {
  const p = c.object(v, 'project');
  if (!p) return;
  c.string(p, 'id', 'project', { required: true });
  c.string(p, 'tenantId', 'project', { required: true });
  c.string(p, 'name', 'project', { max: 200 });
  const s = c.object(p.settings, 'project.settings');
  if (!s) return;
  for (const k of SETTING_STRINGS) c.string(s, k, 'project.settings');
  for (const k of SETTING_BOOLEANS) c.boolean(s, k, 'project.settings');
  c.string(s, 'primaryColor', 'project.settings', {
    pattern: /^#(?:[0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/i,
    hint: 'must be a hex colour like #0055ff',
  });
  for (const k of ['replyTo', 'supportEmail']) {
    if (typeof s[k] === 'string' && !EMAIL_RE.test(s[k] as string))
      c.add(`project.settings.${k}`, `${k} must be an email address`);
  }
  for (const k of ['logoUrl', 'appBaseUrl']) {
    if (typeof s[k] === 'string' && !isHttpUrl(s[k] as string))
      c.add(`project.settings.${k}`, `${k} must be an absolute http(s) URL`);
  }
  // The audit log's retention in days (docs/audit.md): 1 to 3650, default 90.
  const r = s.auditRetentionDays;
  if (r !== undefined && (typeof r !== 'number' || !Number.isSafeInteger(r) || r < 1 || r > 3650))
    c.add('project.settings.auditRetentionDays', 'auditRetentionDays must be a whole number of days from 1 to 3650');
  // File limits (docs/files.md#per-project-limits-quota-and-retention).
  const f = c.object(s.files, 'project.settings.files');
  for (const k of ['maxFileBytes', 'quotaBytes', 'retentionDays']) {
    if (f && f[k] !== undefined && (typeof f[k] !== 'number' || !Number.isSafeInteger(f[k]) || (f[k] as number) < 0))
      c.add(`project.settings.files.${k}`, `${k} must be a whole number, 0 or more`);
  }
  // Trusted documents and HTTP caching (docs/documents.md, docs/graphql.md "HTTP caching").
  const policy = s.documentPolicy;
  if (policy !== undefined && policy !== 'any' && policy !== 'apq' && policy !== 'trusted-only')
    c.add('project.settings.documentPolicy', 'documentPolicy must be "any", "apq" or "trusted-only"');
  const whole = (o: Record<string, unknown>, k: string, path: string, max: number) => {
    if (
      o[k] !== undefined &&
      (typeof o[k] !== 'number' || !Number.isSafeInteger(o[k]) || (o[k] as number) < 0 || (o[k] as number) > max)
    )
      c.add(`${path}.${k}`, `${k} must be a whole number from 0 to ${max}`);
  };
  whole(s, 'apqMaxBytes', 'project.settings', 16 * 1024 * 1024);
  const cache = c.object(s.cache, 'project.settings.cache');
  if (cache) {
    whole(cache, 'maxAge', 'project.settings.cache', 31_536_000);
    whole(cache, 'staleWhileRevalidate', 'project.settings.cache', 31_536_000);
    if (cache.purgeUrl !== undefined && (typeof cache.purgeUrl !== 'string' || !isHttpUrl(cache.purgeUrl)))
      c.add('project.settings.cache.purgeUrl', 'purgeUrl must be an absolute http(s) URL');
  }
}

/** Returns the declared model keys (null when `models` is absent), for cross-references. */
function checkModels(c: Checker, v: unknown): Set<string> | null {
  const models = c.array(v, 'models');
  if (!models) return null;
  const keys = new Set<string>();
  for (const m of models) if (c.isObject(m) && typeof m.key === 'string') keys.add(m.key);
  c.unique(
    models.map((m, i) => ({ key: c.isObject(m) ? m.key : undefined, path: `models[${i}].key` })),
    'model key',
  );
  for (const [i, m] of models.entries()) checkModel(c, m, `models[${i}]`, keys);
  return keys;
}

function checkModel(c: Checker, v: unknown, path: string, modelKeys: Set<string>): void {
  const m = c.object(v, path, true);
  if (!m) return;
  c.string(m, 'key', path, {
    required: true,
    pattern: KEY_RE,
    hint: 'must start with a letter and hold only letters, digits and _ (at most 64)',
  });
  c.string(m, 'name', path, { required: true, max: 200 });
  c.boolean(m, 'versioned', path);
  // Model access (records, not fields): `access.read` decides whose records a reader sees;
  // `self` means a customer sees the records they own.
  const access = c.object(m.access, join(path, 'access'));
  if (access) checkPrincipals(c, access, 'read', join(path, 'access'));
  const fields = c.array(m.fields, join(path, 'fields'), true) ?? [];
  c.unique(
    fields.map((f, i) => ({ key: c.isObject(f) ? f.key : undefined, path: `${path}.fields[${i}].key` })),
    'field key',
  );
  const fieldKeys = new Set<string>();
  fields.forEach((f, i) => {
    checkField(c, f, `${path}.fields[${i}]`, modelKeys);
    if (c.isObject(f) && typeof f.key === 'string') fieldKeys.add(f.key);
  });
  const lookups = c.array(m.lookups, join(path, 'lookups')) ?? [];
  lookups.forEach((l, i) => {
    const lp = `${path}.lookups[${i}]`;
    const lo = c.object(l, lp, true);
    if (!lo) return;
    const keyBy = c.strings(lo, 'keyBy', lp, { required: true, nonEmpty: true }) ?? [];
    keyBy.forEach((k, j) => {
      if (!fieldKeys.has(k))
        c.add(`${lp}.keyBy[${j}]`, `keyBy names "${k}", which is not a field of model "${String(m.key)}"`);
    });
  });
}

function checkPrincipals(c: Checker, access: Obj, key: 'read' | 'write', path: string): void {
  const list = c.strings(access, key, path);
  if (!list) return;
  if (list.length === 0)
    c.add(
      join(path, key),
      `access.${key} must list at least one principal (leave it out to allow any authenticated principal)`,
    );
  list.forEach((p, i) => {
    if (!(PRINCIPALS as readonly string[]).includes(p))
      c.add(`${path}.${key}[${i}]`, `"${p}" is not a principal; use one of ${PRINCIPALS.join(', ')}`);
  });
}

function checkField(c: Checker, v: unknown, path: string, modelKeys: Set<string>): void {
  const f = c.object(v, path, true);
  if (!f) return;
  c.string(f, 'key', path, {
    required: true,
    pattern: KEY_RE,
    hint: 'must start with a letter and hold only letters, digits and _ (at most 64)',
  });
  const type = c.string(f, 'type', path, { required: true });
  if (type !== null && !(FIELD_TYPES as readonly string[]).includes(type)) {
    c.add(join(path, 'type'), `"${type}" is not a field type; use one of ${FIELD_TYPES.join(', ')}`);
  }
  c.string(f, 'label', path);
  c.string(f, 'placeholder', path);
  c.boolean(f, 'required', path);
  c.boolean(f, 'queryable', path);
  const access = c.object(f.access, join(path, 'access'));
  if (access) {
    checkPrincipals(c, access, 'read', join(path, 'access'));
    checkPrincipals(c, access, 'write', join(path, 'access'));
  }
  const cp = join(path, 'config');
  const config = c.object(f.config, cp, type === 'enum' || type === 'select') ?? {};
  if (f.itemType !== undefined && !(FIELD_TYPES as readonly unknown[]).includes(f.itemType)) {
    c.add(join(path, 'itemType'), `itemType must be one of ${FIELD_TYPES.join(', ')}`);
  }
  if (config.multiple !== undefined) c.boolean(config, 'multiple', cp);
  if (type === 'text') c.string(config, 'widget', cp);
  if (type === 'enum' && c.isObject(f.config)) checkEnum(c, config, cp);
  if (type === 'select' && c.isObject(f.config)) {
    const target = c.string(config, 'optionModelKey', cp, { required: true });
    if (target !== null && target.trim() !== '' && !modelKeys.has(target)) {
      c.add(join(cp, 'optionModelKey'), `optionModelKey names "${target}", which is not a model of this config`);
    }
  }
  if (type === 'reference' || type === 'model') {
    const one = c.string(config, 'modelKey', cp);
    if (one !== null && !modelKeys.has(one))
      c.add(join(cp, 'modelKey'), `modelKey names "${one}", which is not a model of this config`);
  }
  if (type === 'reference') {
    (c.strings(config, 'modelKeys', cp) ?? []).forEach((k, i) => {
      if (!modelKeys.has(k))
        c.add(`${cp}.modelKeys[${i}]`, `modelKeys names "${k}", which is not a model of this config`);
    });
  }
}

function checkEnum(c: Checker, config: Obj, cp: string): void {
  const options = c.array(config.options, join(cp, 'options'), true);
  if (!options) return;
  if (options.length === 0) c.add(join(cp, 'options'), 'an enum field needs at least one option');
  const values: string[] = [];
  options.forEach((o, i) => {
    const op = `${cp}.options[${i}]`;
    const opt = c.object(o, op, true);
    if (!opt) return;
    const value = c.string(opt, 'value', op, { required: true });
    c.string(opt, 'label', op, { required: true });
    if (value !== null) values.push(value);
  });
  c.unique(
    values.map((v, i) => ({ key: v, path: `${cp}.options[${i}].value` })),
    'option value',
  );
  const dflt = config.default;
  if (dflt !== undefined && dflt !== null) {
    const given = Array.isArray(dflt) ? dflt : [dflt];
    if (Array.isArray(dflt) && config.multiple !== true)
      c.add(join(cp, 'default'), 'default may be a list only when multiple is true');
    for (const d of given) {
      if (typeof d !== 'string' || !values.includes(d))
        c.add(join(cp, 'default'), `default ${JSON.stringify(d)} is not one of the option values`);
    }
  }
}
