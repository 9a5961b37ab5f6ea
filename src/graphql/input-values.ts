import { Kind, type ValueNode } from 'graphql';

/**
 * Whether an input value can be stored, walked without recursion: strings PostgreSQL cannot hold
 * (NUL, lone surrogates) in keys and values, and nesting past a depth. For variables' JSON values
 * and for literals written in a document; the limits and errors around them are limits.ts'.
 */
/** Whether a string can be stored: PostgreSQL text and jsonb hold neither NUL nor lone surrogates. */
export function badString(s: string): string | null {
  if (s.includes('\0')) return 'NUL characters are not allowed';
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed())
    return 'unpaired UTF-16 surrogates are not allowed';
  return null;
}

/** A problem found in an input value: what is wrong and where (a dotted path inside the value). */
export interface InputProblem {
  path: string;
  reason: string;
}

/**
 * Checks a JSON-like value (a variable's value) for strings that cannot be stored, in keys and
 * values, and for nesting deeper than `maxDepth` (`LIMITS.maxInputDepth`). Iterative: a hostile depth cannot
 * exhaust the stack here.
 */
export function checkInputValue(value: unknown, maxDepth: number): InputProblem | null {
  // Paths are built only for the problem found: a dotted path per value visited was most of this
  // check's cost on every request with variables (docs/decisions.md, "Writes, session 5: service CPU per mutation").
  const stack: Visit[] = [{ v: value, key: '', up: null, depth: 0 }];
  while (stack.length) {
    const at = stack.pop()!;
    const v = at.v;
    if (typeof v === 'string') {
      const bad = badString(v);
      if (bad) return { path: pathOf(at), reason: bad };
    } else if (typeof v === 'object' && v !== null) {
      if (at.depth >= maxDepth) return { path: pathOf(at), reason: `values may nest at most ${maxDepth} levels deep` };
      const depth = at.depth + 1;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) if (needsVisit(v[i])) stack.push({ v: v[i], key: i, up: at, depth });
      } else {
        const o = v as Record<string, unknown>;
        for (const k of Object.keys(o)) {
          const badKey = badString(k);
          if (badKey) return { path: pathOf(at), reason: `object keys: ${badKey}` };
          if (needsVisit(o[k])) stack.push({ v: o[k], key: k, up: at, depth });
        }
      }
    }
  }
  return null;
}

/** A value on checkInputValue's stack: where it sits is kept as a link to its parent. */
interface Visit {
  v: unknown;
  key: string | number;
  up: Visit | null;
  depth: number;
}

/** Numbers, booleans and nulls cannot fail a check: never stacked. */
const needsVisit = (v: unknown): boolean => typeof v === 'string' || (typeof v === 'object' && v !== null);

/** The dotted path of a visited value (`a.0.b`; '' for the value itself). */
function pathOf(at: Visit): string {
  const keys: (string | number)[] = [];
  for (let x: Visit | null = at; x !== null && x.up !== null; x = x.up) keys.push(x.key);
  let path = '';
  for (let i = keys.length - 1; i >= 0; i--) path = path ? `${path}.${keys[i]}` : String(keys[i]);
  return path;
}

/** The same checks for a literal value written in the document. */
export function checkLiteral(value: ValueNode, maxDepth: number): InputProblem | null {
  const stack: { v: ValueNode; path: string; depth: number }[] = [{ v: value, path: '', depth: 0 }];
  while (stack.length) {
    const { v, path, depth } = stack.pop()!;
    if (v.kind === Kind.STRING) {
      const bad = badString(v.value);
      if (bad) return { path, reason: bad };
    } else if (v.kind === Kind.LIST || v.kind === Kind.OBJECT) {
      if (depth >= maxDepth) return { path, reason: `values may nest at most ${maxDepth} levels deep` };
      if (v.kind === Kind.LIST)
        for (const [i, x] of v.values.entries())
          stack.push({ v: x, path: path ? `${path}.${i}` : String(i), depth: depth + 1 });
      else
        for (const f of v.fields)
          stack.push({ v: f.value, path: path ? `${path}.${f.name.value}` : f.name.value, depth: depth + 1 });
    }
  }
  return null;
}
