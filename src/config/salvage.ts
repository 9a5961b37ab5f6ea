import type { Obj } from './check.ts';
import type { ApplyConfigInput, ConfigError } from './types.ts';
import { LONE_SURROGATE, validateConfig } from './validate.ts';

/**
 * A push applies what is valid (CONTRACT §3, and the spec's rule for customDomains): an invalid
 * entry of a collection below is skipped and reported, every valid entry still applies. Entries
 * that depend on a skipped one (a field whose select names a skipped model, a hook on a skipped
 * operation) fail validation in turn and are skipped too. An error anywhere else (the config's
 * key or name, the project pin, settings, collections whose entries have no stable key of their
 * own) applies nothing: `svc push --atomic` asks for that behaviour always.
 *
 * Skipped entries keep their live state: the apply step keeps the live model, operation, hook …
 * of a skipped entry's key instead of deleting it (see `keep`).
 */
export const SALVAGEABLE = [
  'models',
  'apiKeys',
  'operations',
  'hooks',
  'segments',
  'authProviders',
  'customerRoles',
] as const;
export type Salvageable = (typeof SALVAGEABLE)[number];

export interface Salvaged {
  config: ApplyConfigInput;
  /** Every error, with paths into the config as pushed. */
  errors: ConfigError[];
  /** Per collection, the keys (or names) of skipped entries whose live state must stay. */
  keep: Partial<Record<Salvageable, string[]>>;
}

const ENTRY = /^([A-Za-z]+)\[(\d+)\]/;

/** Null when an error is outside the salvageable entries: then nothing may be applied. */
export function salvage(input: unknown, first: ConfigError[]): Salvaged | null {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return null;
  const original = input as Obj;
  // For each collection, the original index of every entry still in the running config.
  const indexes = new Map<string, number[]>();
  const errors: ConfigError[] = [];
  const seen = new Set<string>();
  const keep: Partial<Record<Salvageable, string[]>> = {};
  let current: Obj = original;
  let pending = first;
  for (let round = 0; round < 50; round++) {
    const drop = new Map<string, Set<number>>();
    for (const e of pending) {
      const m = ENTRY.exec(e.path);
      const name = m?.[1];
      if (!m || !(SALVAGEABLE as readonly string[]).includes(name!) || !Array.isArray(current[name!])) return null;
      const at = Number(m[2]);
      const orig = indexes.get(name!)?.[at] ?? at;
      const path = `${name}[${orig}]${e.path.slice(m[0].length)}`;
      if (!seen.has(`${path}\u0000${e.message}`)) {
        seen.add(`${path}\u0000${e.message}`);
        errors.push({ path, message: e.message });
      }
      if (!drop.has(name!)) drop.set(name!, new Set());
      drop.get(name!)!.add(at);
    }
    const next: Obj = { ...current };
    for (const [name, gone] of drop) {
      const list = current[name] as unknown[];
      const idx = indexes.get(name) ?? list.map((_, i) => i);
      for (const i of gone) {
        const entry = list[i] as Obj | undefined;
        const id = name === 'apiKeys' ? entry?.name : entry?.key;
        // An id PostgreSQL cannot hold (NUL, a lone surrogate) names no live entry to keep.
        if (typeof id === 'string' && !id.includes('\u0000') && !LONE_SURROGATE.test(id))
          (keep[name as Salvageable] ??= []).push(id);
      }
      next[name] = list.filter((_, i) => !gone.has(i));
      indexes.set(
        name,
        idx.filter((_, i) => !gone.has(i)),
      );
    }
    current = next;
    const again = validateConfig(current);
    if (again.config) return { config: again.config, errors, keep };
    pending = again.errors;
  }
  return null;
}
