import type { ConfigError, Obj } from '../projects/types.ts';

export type { Obj };

/**
 * A tiny collector for validation: every check records a `{ path, message }` and carries on,
 * so one run reports every mistake of the file.
 */
export class Checker {
  readonly errors: ConfigError[] = [];
  /** Accepted, applied, but worth telling (e.g. an auth provider that cannot log anyone in yet). */
  readonly warnings: ConfigError[] = [];

  add(path: string, message: string): void {
    this.errors.push({ path, message });
  }

  warn(path: string, message: string): void {
    this.warnings.push({ path, message });
  }

  isObject(v: unknown): v is Obj {
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  }

  /** The value must be an object; reports and returns null otherwise. */
  object(v: unknown, path: string, required = false): Obj | null {
    if (v === undefined || v === null) {
      if (required) this.add(path, `${last(path)} is required`);
      return null;
    }
    if (!this.isObject(v)) {
      this.add(path, `${last(path)} must be an object`);
      return null;
    }
    return v;
  }

  array(v: unknown, path: string, required = false): unknown[] | null {
    if (v === undefined || v === null) {
      if (required) this.add(path, `${last(path)} is required`);
      return null;
    }
    if (!Array.isArray(v)) {
      this.add(path, `${last(path)} must be an array`);
      return null;
    }
    return v;
  }

  string(
    o: Obj,
    key: string,
    path: string,
    opts: { required?: boolean; pattern?: RegExp; hint?: string; max?: number } = {},
  ): string | null {
    const v = o[key];
    const p = join(path, key);
    if (v === undefined || v === null) {
      if (opts.required) this.add(p, `${key} is required`);
      return null;
    }
    if (typeof v !== 'string') {
      this.add(p, `${key} must be a string`);
      return null;
    }
    if (opts.required && v.trim() === '') {
      this.add(p, `${key} must not be empty`);
      return null;
    }
    if (v.length > (opts.max ?? 2000)) {
      this.add(p, `${key} must be at most ${opts.max ?? 2000} characters`);
      return null;
    }
    if (opts.pattern && !opts.pattern.test(v)) {
      this.add(p, `${key} ${JSON.stringify(v.slice(0, 80))} ${opts.hint ?? 'is not valid'}`);
      return null;
    }
    return v;
  }

  boolean(o: Obj, key: string, path: string): void {
    const v = o[key];
    if (v !== undefined && v !== null && typeof v !== 'boolean')
      this.add(join(path, key), `${key} must be true or false`);
  }

  number(o: Obj, key: string, path: string): void {
    const v = o[key];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isFinite(v)))
      this.add(join(path, key), `${key} must be a number`);
  }

  /** A list of strings; returns the valid strings (or null when absent or not a list). */
  strings(o: Obj, key: string, path: string, opts: { required?: boolean; nonEmpty?: boolean } = {}): string[] | null {
    const v = o[key];
    const p = join(path, key);
    if (v === undefined || v === null) {
      if (opts.required) this.add(p, `${key} is required`);
      return null;
    }
    if (!Array.isArray(v)) {
      this.add(p, `${key} must be a list of strings`);
      return null;
    }
    if (opts.nonEmpty && v.length === 0) this.add(p, `${key} must not be empty`);
    const out: string[] = [];
    v.forEach((s, i) => {
      if (typeof s !== 'string' || s === '') this.add(`${p}[${i}]`, `each entry of ${key} must be a non-empty string`);
      else out.push(s);
    });
    return out;
  }

  /** Reports the second and later occurrence of each key. */
  unique(items: { key: unknown; path: string }[], what: string): void {
    const seen = new Set<string>();
    for (const { key, path } of items) {
      if (typeof key !== 'string') continue;
      if (seen.has(key)) this.add(path, `duplicate ${what} "${key}"`);
      seen.add(key);
    }
  }
}

export function join(path: string, key: string): string {
  if (path === '') return key;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function last(path: string): string {
  const m = /([A-Za-z_$][A-Za-z0-9_$]*)(\[\d+\])?$/.exec(path);
  return m?.[1] ?? path;
}

export const KEY_RE = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
export const SLUG_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
export const ENV_VAR_RE = /^[A-Z_][A-Z0-9_]*$/;
export const HOSTNAME_RE = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/;

export function isHttpUrl(v: string, httpsOnly = false): boolean {
  try {
    const u = new URL(v);
    return u.protocol === 'https:' || (!httpsOnly && u.protocol === 'http:');
  } catch {
    return false;
  }
}

/**
 * Explains why `v` is not an exact browser origin (https, host, port only when not 443,
 * nothing else), or returns null when it is one.
 */
export function originProblem(v: string): string | null {
  if (v.includes('*')) return 'must not contain wildcards; list each origin exactly';
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return 'is not a URL origin like https://shop.example.com';
  }
  if (u.protocol !== 'https:') return 'must use the https scheme';
  if (u.username || u.password) return 'must not contain credentials';
  if (v.replace(/\/$/, '') !== v && v.endsWith('/')) return 'must not end with a slash or contain a path';
  if (u.pathname !== '/' || u.search || u.hash) return 'must not contain a path, query or fragment';
  if (/:443$/.test(v)) return 'must leave out the default port 443';
  if (`${u.protocol}//${u.host}` !== v) return `must be written exactly as ${u.protocol}//${u.host}`;
  return null;
}

/** Redirect URIs: absolute, https (http only for localhost), no fragment, no wildcards. */
export function redirectUriProblem(v: string): string | null {
  if (v.includes('*')) return 'must not contain wildcards; redirect URIs are matched exactly';
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return 'is not an absolute URL';
  }
  const local = u.hostname === 'localhost' || u.hostname === '127.0.0.1' || u.hostname === '[::1]';
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && local))
    return 'must use https (http is allowed only for localhost)';
  if (u.hash) return 'must not contain a fragment';
  return null;
}
