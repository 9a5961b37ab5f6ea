import { BadUserInput, PermissionDenied, ScopeDenied } from '../errors.ts';
import type { KeyKind, KeyPrincipal } from './principal.ts';
import { isPublicKey } from './principal.ts';

/**
 * The scope catalogue of the spec ("Scopes", "Per-operation scopes") and the rules that bind
 * scopes to key kinds. Three things live here:
 *  - `parseScopes`: what a key definition may contain (creation-time validation);
 *  - `hasScope`: whether held scopes satisfy a required one (request-time check);
 *  - `ScopeDenied` / `missingScope`: the one error of the spec without an `extensions.code`.
 */

/** Every concrete, unparameterised scope of the spec's table. */
export const BASE_SCOPES = [
  'records:read',
  'records:write',
  'records:delete',
  'records:publish',
  'drafts:read',
  'files:read',
  'files:list',
  'files:list.all',
  'files:write',
  'files:delete',
  'search:read',
  'search:semantic:read',
  'search:semantic:write',
  'schemas:read',
  'operations:execute',
  'operations:read',
  'notifications:read',
  'notifications:write',
  // Customer profiles (issue 12): setting the attributes segments read. Secret keys only.
  'customers:write',
  'schedules:read',
  'schedules:write',
  'secrets:read.project',
  'secrets:put.project',
  'secrets:delete.project',
  'provision',
  // The hosted-login lane family: the bare prefix covers every lane, the admin lane included.
  'auth:login_with_svc',
] as const;

/** Scopes that take a `:<parameter>` suffix, and what the parameter names. */
const PARAMETERISED: Record<string, 'model' | 'operation' | 'lane'> = {
  'records:read': 'model',
  'records:write': 'model',
  'records:delete': 'model',
  'records:publish': 'model',
  'operations:execute': 'operation',
  'auth:login_with_svc': 'lane',
};

export const MODEL_KEY_RE = /^[a-zA-Z][a-zA-Z0-9_]{0,63}$/;
const OPERATION_KEY_RE = /^[a-zA-Z][a-zA-Z0-9_-]{0,127}$/;
const LANE_RE = /^[a-z][a-z0-9_]{0,63}$/;
const MAX_SCOPE_LENGTH = 200;
export const INSUFFICIENT = 'Insufficient permissions';
const MAX_SCOPES = 200;

/**
 * Capabilities a public key must never hold. Per-model and per-lane representatives are
 * included so that a wildcard (`records:*`) or a bare prefix (`auth:login_with_svc`) that would
 * cover them is caught by the same coverage test as the concrete scopes.
 */
const SECRET_ONLY: readonly string[] = [
  'drafts:read',
  'records:write',
  'records:delete',
  'records:publish',
  'records:write:_any',
  'records:delete:_any',
  'records:publish:_any',
  'files:list.all',
  'files:write',
  'files:delete',
  'search:semantic:write',
  'notifications:write',
  'customers:write',
  'schedules:write',
  'secrets:read.project',
  'secrets:put.project',
  'secrets:delete.project',
  'provision',
  'auth:login_with_svc:admin',
];

export function missingScope(scope: string): ScopeDenied {
  return new ScopeDenied(scope);
}

/**
 * Whether `held` covers `required`: equal, `*`, a `prefix:*` wildcard, or a scope that is a
 * segment prefix of the required one (unscoped `operations:execute` covers
 * `operations:execute:<key>`, `records:read` covers `records:read:<model>`). Segments are
 * split on `:` only, so `files:list` does not cover `files:list.all`.
 */
export function scopeCovers(held: string, required: string): boolean {
  if (held === required || held === '*') return true;
  if (held.endsWith(':*')) return required.startsWith(held.slice(0, -1));
  return required.startsWith(held + ':');
}

type ScopeHolder = Pick<KeyPrincipal, 'kind' | 'scopes'> | Iterable<string>;

function heldScopes(holder: ScopeHolder): { kind: KeyKind | null; scopes: Iterable<string> } {
  if (typeof holder === 'object' && holder !== null && 'scopes' in holder && 'kind' in holder) {
    return { kind: holder.kind, scopes: holder.scopes };
  }
  return { kind: null, scopes: holder as Iterable<string> };
}

/**
 * Request-time check. Given a principal, kind rules apply on top of the scopes: `provision`
 * needs an `sk_t_` key whatever its scopes say, and a public key never passes a secret-only
 * requirement (defence in depth: creation already refuses such grants).
 */
export function hasScope(holder: ScopeHolder, required: string): boolean {
  const { kind, scopes } = heldScopes(holder);
  if (kind !== null) {
    if (required === 'provision' && kind !== 'sk_t') return false;
    if (isPublicKey(kind) && isSecretOnlyScope(required)) return false;
  }
  if (scopes instanceof Set) return coveredBySet(scopes as ReadonlySet<string>, required);
  for (const s of scopes) if (scopeCovers(s, required)) return true;
  return false;
}

/**
 * A principal's scope set is immutable and lives as long as its cached key, so the answer per
 * required scope is remembered with it: resolvers ask the same few questions on every request.
 */
const coverage = new WeakMap<ReadonlySet<string>, Map<string, boolean>>();

function coveredBySet(scopes: ReadonlySet<string>, required: string): boolean {
  let known = coverage.get(scopes);
  if (!known) coverage.set(scopes, (known = new Map()));
  let answer = known.get(required);
  if (answer === undefined) {
    answer = scopes.has(required);
    if (!answer) for (const s of scopes) if (scopeCovers(s, required)) answer = true;
    // Required scopes carry model and operation keys; bound the memo against odd inputs.
    if (known.size < 256) known.set(required, answer);
  }
  return answer;
}

/** Whether a requirement is a secret-only capability (a write, a draft read, a vault scope…). */
export function isSecretOnlyScope(required: string): boolean {
  let answer = secretOnly.get(required);
  if (answer === undefined) {
    answer = SECRET_ONLY.some((s) => scopeCovers(required, s) || scopeCovers(s, required));
    // Asked on every public-key request with a handful of distinct scopes: remember them.
    if (secretOnly.size < 4096) secretOnly.set(required, answer);
  }
  return answer;
}

const secretOnly = new Map<string, boolean>();

/**
 * Throws unless the holder has `required`. A public key reaching a secret-only requirement
 * gets PERMISSION_DENIED `Insufficient permissions` (spec Errors: "public key attempting a
 * write"); any other miss gets `missing required scope: <scope>` without a code.
 */
export function requireScope(holder: ScopeHolder, required: string): void {
  if (hasScope(holder, required)) return;
  const { kind } = heldScopes(holder);
  if (kind !== null && isPublicKey(kind) && isSecretOnlyScope(required)) throw new PermissionDenied(INSUFFICIENT);
  throw missingScope(required);
}

/** Segment prefixes of catalogue scopes: what a `prefix:*` wildcard may name. */
const WILDCARD_PREFIXES: ReadonlySet<string> = (() => {
  const out = new Set<string>();
  for (const s of [...BASE_SCOPES, ...Object.keys(PARAMETERISED).map((p) => `${p}:x`)]) {
    const parts = s.split(':');
    for (let i = 1; i < parts.length; i++) out.add(parts.slice(0, i).join(':'));
  }
  return out;
})();

/** Syntax and catalogue check of one scope; returns an error message or null. */
export function scopeError(scope: unknown): string | null {
  if (typeof scope !== 'string' || scope === '') return 'a scope must be a non-empty string';
  if (scope.length > MAX_SCOPE_LENGTH)
    return `scope "${scope.slice(0, 40)}…" is longer than ${MAX_SCOPE_LENGTH} characters`;
  const shown = JSON.stringify(scope);
  if (/\s/.test(scope)) return `scope ${shown} contains whitespace; separate scopes with commas`;
  if (scope === '*') return null;
  if ((BASE_SCOPES as readonly string[]).includes(scope)) return null;
  if (scope.endsWith(':*')) {
    return WILDCARD_PREFIXES.has(scope.slice(0, -2)) || PARAMETERISED[scope.slice(0, -2)]
      ? null
      : `unknown scope ${shown}`;
  }
  const cut = scope.lastIndexOf(':');
  const base = scope.slice(0, cut);
  const param = scope.slice(cut + 1);
  const kind = cut > 0 ? PARAMETERISED[base] : undefined;
  if (!kind) return `unknown scope ${shown}`;
  const re = kind === 'model' ? MODEL_KEY_RE : kind === 'operation' ? OPERATION_KEY_RE : LANE_RE;
  if (!re.test(param)) return `scope ${shown} does not name a valid ${kind} key`;
  return null;
}

/** The secret-only capability a scope would grant or cover, if any (for the error message). */
export function secretCapabilityOf(scope: string): string | null {
  for (const s of SECRET_ONLY) {
    // Either the scope grants a secret-only capability outright or is a narrower form of one.
    if (scopeCovers(s, scope)) return scope;
    if (scopeCovers(scope, s)) return s.replace(/:_any$/, ':<model>');
  }
  return null;
}

/**
 * Validates the scopes of a key definition for a key kind (grant-aware rules of "API keys"
 * rule 5): unknown or malformed scopes, secret-only grants on public keys — including
 * prefixes that would cover one — and `provision` outside `sk_t_`. Returns them de-duplicated.
 */
export function parseScopes(kind: KeyKind, input: unknown): string[] {
  if (!Array.isArray(input) || input.length === 0)
    throw new BadUserInput('scopes must be a non-empty list of scope strings');
  if (input.length > MAX_SCOPES) throw new BadUserInput(`a key may hold at most ${MAX_SCOPES} scopes`);
  const out: string[] = [];
  for (const raw of input) {
    const err = scopeError(raw);
    if (err) throw new BadUserInput(err);
    const scope = raw as string;
    if (isPublicKey(kind)) {
      const covered = secretCapabilityOf(scope);
      if (covered) {
        const why = covered === scope ? 'it is secret-only' : `it covers the secret-only ${covered}`;
        throw new BadUserInput(`scope "${scope}" cannot be granted to a public key (${kind}_): ${why}`);
      }
    }
    if (scope === 'provision' && kind !== 'sk_t') {
      throw new BadUserInput('scope "provision" can only be granted to a secret tenant key (sk_t_)');
    }
    if (!out.includes(scope)) out.push(scope);
  }
  return out;
}
