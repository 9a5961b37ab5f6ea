import { ruleErrors } from '../content/targeting.ts';
import { scopeError, parseScopes } from '../auth/scopes.ts';
import { checkOauth2Config } from './validate-providers.ts';
import {
  Checker,
  ENV_VAR_RE,
  HOSTNAME_RE,
  KEY_RE,
  SLUG_RE,
  isHttpUrl,
  join,
  originProblem,
  redirectUriProblem,
  type Obj,
} from './check.ts';
import { cronProblem, isTimeZone } from '../operations/cron.ts';
import { HOOK_EVENTS } from './types.ts';

/** Validation of every collection besides models and design tokens. */
export function checkCollections(c: Checker, input: Obj, modelKeys: Set<string> | null, hasBaseUrl: boolean): void {
  const operationKeys = checkOperations(c, input.operations, hasBaseUrl);
  checkHooks(c, input.hooks, operationKeys, modelKeys);
  checkSchedules(c, input.schedules, operationKeys);
  checkSegments(c, input.segments);
  checkAuthProviders(c, input.authProviders);
  checkRelyingParties(c, input.relyingParties);
  checkPlacements(c, input.placements, modelKeys);
  checkApiKeys(c, input.apiKeys, modelKeys);
  checkCustomerRoles(c, input.customerRoles);
  checkApps(c, input.apps, modelKeys);
}

/** Iterates the objects of an optional array collection, reporting non-objects. */
function each(c: Checker, v: unknown, name: string, fn: (o: Obj, path: string) => void): Obj[] {
  const list = c.array(v, name) ?? [];
  const out: Obj[] = [];
  list.forEach((item, i) => {
    const o = c.object(item, `${name}[${i}]`, true);
    if (!o) return;
    out.push(o);
    fn(o, `${name}[${i}]`);
  });
  return out;
}

function uniqueBy(c: Checker, v: unknown, name: string, key: string, what: string): void {
  if (!Array.isArray(v)) return;
  c.unique(
    v.map((o, i) => ({ key: c.isObject(o) ? o[key] : undefined, path: `${name}[${i}].${key}` })),
    what,
  );
}

const KEY_HINT = 'must start with a letter and hold only letters, digits and _ (at most 64)';
const OP_KEY_RE = /^[A-Za-z][A-Za-z0-9_-]{0,127}$/;

function checkOperations(c: Checker, v: unknown, hasBaseUrl: boolean): Set<string> | null {
  if (v === undefined || v === null) return null;
  const keys = new Set<string>();
  each(c, v, 'operations', (o, p) => {
    const key = c.string(o, 'key', p, {
      required: true,
      pattern: OP_KEY_RE,
      hint: 'must start with a letter and hold only letters, digits, _ and -',
    });
    if (key) keys.add(key);
    c.string(o, 'name', p, { max: 200 });
    c.string(o, 'description', p);
    const endpoint = c.string(o, 'endpoint', p, { required: true });
    if (endpoint && endpoint.trim() !== '') {
      const absolute = /^[a-z][a-z0-9+.-]*:/i.test(endpoint);
      if (absolute && !isHttpUrl(endpoint))
        c.add(`${p}.endpoint`, 'endpoint must be an http(s) URL or a relative path');
      if (!absolute && !hasBaseUrl)
        c.add(`${p}.endpoint`, `endpoint "${endpoint}" is relative, so operationBaseUrl must be set`);
    }
  });
  uniqueBy(c, v, 'operations', 'key', 'operation key');
  return keys;
}

function checkOperationRef(c: Checker, o: Obj, p: string, operationKeys: Set<string> | null): void {
  const op = c.string(o, 'operationKey', p, { required: true });
  if (op && operationKeys && !operationKeys.has(op))
    c.add(`${p}.operationKey`, `operationKey names "${op}", which is not an operation of this config`);
}

function checkHooks(c: Checker, v: unknown, operationKeys: Set<string> | null, modelKeys: Set<string> | null): void {
  each(c, v, 'hooks', (o, p) => {
    c.string(o, 'key', p, {
      required: true,
      pattern: OP_KEY_RE,
      hint: 'must start with a letter and hold only letters, digits, _ and -',
    });
    c.string(o, 'name', p, { max: 200 });
    const event = c.string(o, 'event', p, { required: true });
    if (event && !(HOOK_EVENTS as readonly string[]).includes(event))
      c.add(`${p}.event`, `"${event}" is not a hook event; use one of ${HOOK_EVENTS.join(', ')}`);
    checkOperationRef(c, o, p, operationKeys);
    const filter = c.object(o.filter, `${p}.filter`);
    if (filter) {
      const mk = c.string(filter, 'modelKey', `${p}.filter`);
      if (mk && modelKeys && !modelKeys.has(mk))
        c.add(`${p}.filter.modelKey`, `filter.modelKey names "${mk}", which is not a model of this config`);
    }
  });
  uniqueBy(c, v, 'hooks', 'key', 'hook key');
}

function checkSchedules(c: Checker, v: unknown, operationKeys: Set<string> | null): void {
  each(c, v, 'schedules', (o, p) => {
    c.string(o, 'key', p, {
      pattern: OP_KEY_RE,
      hint: 'must start with a letter and hold only letters, digits, _ and -',
    });
    checkOperationRef(c, o, p, operationKeys);
    const cron = c.string(o, 'cron', p, { required: true });
    const tz = c.string(o, 'timezone', p);
    if (cron && cron.trim() !== '') {
      const problem = cronProblem(cron, tz ?? 'UTC');
      if (problem) c.add(`${p}.cron`, problem);
    }
    if (tz !== null && !isTimeZone(tz))
      c.add(`${p}.timezone`, `"${tz}" is not an IANA time zone name (for example Europe/Berlin)`);
    c.boolean(o, 'enabled', p);
  });
  uniqueBy(c, v, 'schedules', 'key', 'schedule key');
}

function checkRule(c: Checker, v: unknown, p: string): void {
  for (const e of ruleErrors(v, p, false)) c.add(e.path, e.message);
}

function checkSegments(c: Checker, v: unknown): void {
  each(c, v, 'segments', (o, p) => {
    c.string(o, 'key', p, { required: true, pattern: KEY_RE, hint: KEY_HINT });
    c.string(o, 'name', p, { required: true, max: 200 });
    c.string(o, 'description', p);
    c.boolean(o, 'isActive', p);
    if (o.rules !== undefined && o.rules !== null) checkRule(c, o.rules, `${p}.rules`);
  });
  uniqueBy(c, v, 'segments', 'key', 'segment key');
}

function checkAuthProviders(c: Checker, v: unknown): void {
  const list = each(c, v, 'authProviders', (o, p) => {
    c.string(o, 'key', p, {
      required: true,
      pattern: OP_KEY_RE,
      hint: 'must start with a letter and hold only letters, digits, _ and -',
    });
    c.string(o, 'name', p, { required: true, max: 200 });
    c.string(o, 'type', p, { required: true });
    if (o.type === 'oauth2') checkOauth2Config(c, o.config, `${p}.config`);
    else c.object(o.config, `${p}.config`);
    c.boolean(o, 'enabled', p);
    c.boolean(o, 'isDefault', p);
    c.number(o, 'priority', p);
  });
  uniqueBy(c, v, 'authProviders', 'key', 'auth provider key');
  const defaults = list.map((o, i) => (o.isDefault === true ? i : -1)).filter((i) => i >= 0);
  if (defaults.length > 1)
    c.add(`authProviders[${defaults[1]}].isDefault`, 'only one auth provider may be the default');
}

function checkRelyingParties(c: Checker, v: unknown): void {
  each(c, v, 'relyingParties', (o, p) => {
    if (o.kind !== undefined && o.kind !== 'customer')
      c.add(`${p}.kind`, "relying parties declared in a config are customer-lane: kind must be 'customer' or left out");
    c.string(o, 'clientId', p, {
      required: true,
      pattern: SLUG_RE,
      hint: 'must hold only letters, digits, ., _ and -',
    });
    c.string(o, 'name', p, { required: true, max: 200 });
    (c.strings(o, 'redirectUris', p, { required: true }) ?? []).forEach((u, i) => {
      const why = redirectUriProblem(u);
      if (why) c.add(`${p}.redirectUris[${i}]`, `redirect URI "${u}" ${why}`);
    });
    c.strings(o, 'allowedScopes', p);
    const lm = c.object(o.loginMethods, `${p}.loginMethods`);
    if (lm) {
      c.boolean(lm, 'password', `${p}.loginMethods`);
      c.boolean(lm, 'otp', `${p}.loginMethods`);
      c.strings(lm, 'disabledProviders', `${p}.loginMethods`);
    }
    const domains = c.strings(o, 'customDomains', p) ?? [];
    domains.forEach((d, i) => {
      if (!HOSTNAME_RE.test(d))
        c.add(`${p}.customDomains[${i}]`, `"${d}" is not a lowercase domain name like login.example.com`);
    });
    c.unique(
      domains.map((d, i) => ({ key: d, path: `${p}.customDomains[${i}]` })),
      'custom domain',
    );
    const post = c.string(o, 'postLoginUrl', p);
    if (post !== null && !isHttpUrl(post, true))
      c.add(`${p}.postLoginUrl`, 'postLoginUrl must be an absolute https URL');
    (c.strings(o, 'allowedOrigins', p) ?? []).forEach((u, i) => {
      const why = originProblem(u);
      if (why) c.add(`${p}.allowedOrigins[${i}]`, `origin "${u}" ${why}`);
    });
  });
  uniqueBy(c, v, 'relyingParties', 'clientId', 'relying party clientId');
  // A domain serves one party's login, so it may appear under one party only.
  if (!Array.isArray(v)) return;
  const owner = new Map<string, number>();
  v.forEach((o, i) => {
    if (!c.isObject(o) || !Array.isArray(o.customDomains)) return;
    o.customDomains.forEach((d, j) => {
      if (typeof d !== 'string') return;
      const first = owner.get(d);
      if (first === undefined) owner.set(d, i);
      else if (first !== i)
        c.add(
          `relyingParties[${i}].customDomains[${j}]`,
          `custom domain "${d}" is already used by relyingParties[${first}]`,
        );
    });
  });
}

function checkPlacements(c: Checker, v: unknown, modelKeys: Set<string> | null): void {
  each(c, v, 'placements', (o, p) => {
    c.string(o, 'type', p, { required: true });
    const url = c.string(o, 'url', p, { required: true });
    if (url && url.trim() !== '' && !isHttpUrl(url)) c.add(`${p}.url`, 'url must be an absolute http(s) URL');
    (c.strings(o, 'modelKeys', p) ?? []).forEach((k, i) => {
      if (modelKeys && !modelKeys.has(k))
        c.add(`${p}.modelKeys[${i}]`, `modelKeys names "${k}", which is not a model of this config`);
    });
    c.string(o, 'tabName', p);
    c.boolean(o, 'hideContentTab', p);
  });
}

const MIME_RE = /^[a-z]+\/(?:\*|[a-z0-9][a-z0-9.+-]*)$/i;

function checkApiKeys(c: Checker, v: unknown, modelKeys: Set<string> | null): void {
  each(c, v, 'apiKeys', (o, p) => {
    c.string(o, 'name', p, { required: true, max: 200 });
    const type = c.string(o, 'keyType', p, { required: true });
    if (type && type !== 'public' && type !== 'secret') c.add(`${p}.keyType`, "keyType must be 'public' or 'secret'");
    c.string(o, 'envVar', p, {
      required: true,
      pattern: ENV_VAR_RE,
      hint: 'must be an environment variable name like SVC_PUBLIC_KEY',
    });
    const scopes = c.strings(o, 'scopes', p);
    if (scopes) {
      const bad = scopes.map((s, i) => ({ i, err: scopeError(s) })).filter((x) => x.err);
      for (const b of bad) c.add(`${p}.scopes[${b.i}]`, b.err!);
      if (bad.length === 0 && (type === 'public' || type === 'secret')) {
        try {
          parseScopes(type === 'public' ? 'pk' : 'sk', scopes);
        } catch (err) {
          c.add(`${p}.scopes`, (err as Error).message);
        }
      }
    }
    (c.strings(o, 'allowedModels', p) ?? []).forEach((k, i) => {
      if (modelKeys && !modelKeys.has(k))
        c.add(`${p}.allowedModels[${i}]`, `allowedModels names "${k}", which is not a model of this config`);
    });
    const documents = c.string(o, 'documents', p);
    if (documents !== null && documents !== 'any' && documents !== 'apq' && documents !== 'trusted-only')
      c.add(`${p}.documents`, 'documents must be "any", "apq" or "trusted-only"');
    (c.strings(o, 'allowedFileTypes', p) ?? []).forEach((t, i) => {
      if (!MIME_RE.test(t)) c.add(`${p}.allowedFileTypes[${i}]`, `"${t}" is not a MIME type like image/png or image/*`);
    });
  });
  uniqueBy(c, v, 'apiKeys', 'name', 'API key name');
  uniqueBy(c, v, 'apiKeys', 'envVar', 'API key envVar');
}

function checkCustomerRoles(c: Checker, v: unknown): void {
  each(c, v, 'customerRoles', (o, p) => {
    c.string(o, 'key', p, {
      required: true,
      pattern: /^[A-Za-z][A-Za-z0-9_-]{0,63}$/,
      hint: 'must start with a letter and hold only letters, digits, _ and -',
    });
    c.string(o, 'name', p, { required: true, max: 200 });
    (c.strings(o, 'permissions', p, { required: true }) ?? []).forEach((s, i) => {
      const err = s === 'self:*' ? null : scopeError(s);
      if (err) c.add(`${p}.permissions[${i}]`, err);
    });
    c.boolean(o, 'isDefault', p);
  });
  uniqueBy(c, v, 'customerRoles', 'key', 'customer role key');
}

function checkMappingMap(c: Checker, v: unknown, p: string, modelKeys: Set<string> | null): void {
  const map = c.object(v, p);
  if (!map) return;
  for (const [name, m] of Object.entries(map)) {
    const mp = join(p, name);
    const o = c.object(m, mp, true);
    if (!o) continue;
    const to = c.string(o, 'toModel', mp, { required: true });
    if (to && modelKeys && !modelKeys.has(to))
      c.add(`${mp}.toModel`, `toModel names "${to}", which is not a model of this config`);
    c.string(o, 'naturalKey', mp);
    const fields = c.object(o.fields, `${mp}.fields`);
    if (fields) {
      for (const [k, f] of Object.entries(fields))
        if (typeof f !== 'string') c.add(join(`${mp}.fields`, k), 'each field mapping must name a model field key');
    }
  }
}

function checkApps(c: Checker, v: unknown, modelKeys: Set<string> | null): void {
  const apps = c.object(v, 'apps');
  if (!apps) return;
  for (const [name, a] of Object.entries(apps)) {
    const p = join('apps', name);
    const app = c.object(a, p, true);
    if (!app) continue;
    const source = c.string(app, 'source', p, { required: true });
    if (source && source.trim() !== '' && !isHttpUrl(source, true))
      c.add(`${p}.source`, 'source must be an https URL of the app manifest');
    c.object(app.settings, `${p}.settings`);
    const mappings = c.object(app.mappings, `${p}.mappings`);
    if (!mappings) continue;
    checkMappingMap(c, mappings.sources, `${p}.mappings.sources`, modelKeys);
    checkMappingMap(c, mappings.sinks, `${p}.mappings.sinks`, modelKeys);
    const pf = c.object(mappings.placementFields, `${p}.mappings.placementFields`);
    for (const [k, f] of Object.entries(pf ?? {})) {
      const fp = join(`${p}.mappings.placementFields`, k);
      const o = c.object(f, fp, true);
      if (!o) continue;
      const model = c.string(o, 'model', fp, { required: true });
      if (model && modelKeys && !modelKeys.has(model))
        c.add(`${fp}.model`, `model names "${model}", which is not a model of this config`);
      c.string(o, 'field', fp, { required: true });
    }
  }
}
