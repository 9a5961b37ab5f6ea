/**
 * Targeting (spec "What the service does" 8, "Record variant", "Segment"): the rule language of
 * segments and record variants, its checks and its evaluation. No I/O: callers hand in the
 * subject (a customer's profile attributes, or a read's context) and get an answer.
 *
 * A rule node is one of
 *   { type: 'condition', left: { type: 'field', path }, operator, right?: { type: 'literal', value } }
 *   { type: 'and' | 'or', rules: [node…] }      (a group: all / any of its rules)
 *   { type: 'not', rule: node }
 *   { type: 'segment', key }                    (variants only: shorthand for segments contains key)
 * A list of nodes means all of them. `path` is dotted (`address.country`).
 *
 * Segments are evaluated against the customer's profile attributes; a variant's rules against
 * the read's context `{ authStatus, segments }` (`authStatus` is "" for an anonymous read and
 * "authenticated" with a customer token; `segments` the keys of the segments the customer is in).
 */

export const OPERATORS = [
  'equals',
  'not_equals',
  'greater_than',
  'greater_than_or_equal',
  'less_than',
  'less_than_or_equal',
  'contains',
  'not_contains',
  'in',
  'not_in',
  'starts_with',
  'ends_with',
  'exists',
  'not_exists',
] as const;
export type Operator = (typeof OPERATORS)[number];
const OPERATOR_SET: ReadonlySet<string> = new Set(OPERATORS);
/** Operators that take no `right` value. */
const UNARY: ReadonlySet<string> = new Set(['exists', 'not_exists']);

export type RuleNode =
  | {
      type: 'condition';
      left: { type: 'field'; path: string };
      operator: Operator;
      right?: { type: 'literal'; value: unknown };
    }
  | { type: 'and' | 'or'; rules: RuleNode[] }
  | { type: 'not'; rule: RuleNode }
  | { type: 'segment'; key: string };

/** A read's targeting context, resolved once per request (or given by a secret key's `context`). */
export interface Targeting {
  authStatus: '' | 'authenticated';
  /** Keys of the customer's segments, sorted. */
  segments: readonly string[];
  /** Forces one variant (a secret key's preview); `default` forces the default content. */
  variantId?: string | null;
  /** Identifies the context (loader batches, cache keys); equal contexts have equal keys. */
  key: string;
}

export const DEFAULT_VARIANT = 'default';
export const ANONYMOUS: Targeting = Object.freeze({
  authStatus: '',
  segments: Object.freeze([]) as readonly string[],
  key: '',
}) as Targeting;

export function targeting(
  authStatus: '' | 'authenticated',
  segments: readonly string[],
  variantId: string | null = null,
): Targeting {
  const sorted = [...new Set(segments)].sort();
  return { authStatus, segments: sorted, variantId, key: JSON.stringify([authStatus, sorted, variantId]) };
}

/** One variant as stored in `record_content.variants` (an array in evaluation order). */
export interface StoredVariant {
  id: string;
  rules: RuleNode[];
  data: Record<string, unknown>;
}

const MAX_DEPTH = 8;
const MAX_NODES = 100;
export const VARIANT_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const PATH_RE = /^[A-Za-z_$][A-Za-z0-9_$-]*(\.[A-Za-z0-9_$-]+){0,7}$/;

/**
 * Problems with a rule tree, each `{ path, message }` (empty when fine). `allowSegmentNodes`:
 * variants may name segments directly; segment rules may not (a segment of segments).
 */
export function ruleErrors(v: unknown, path: string, allowSegmentNodes: boolean): { path: string; message: string }[] {
  const out: { path: string; message: string }[] = [];
  let nodes = 0;
  const walk = (n: unknown, p: string, depth: number): void => {
    if (out.length >= 10) return;
    if (++nodes > MAX_NODES) return void out.push({ path: p, message: `at most ${MAX_NODES} rule nodes` });
    if (depth > MAX_DEPTH) return void out.push({ path: p, message: `rules nest at most ${MAX_DEPTH} deep` });
    if (Array.isArray(n)) {
      for (const [i, x] of n.entries()) walk(x, `${p}[${i}]`, depth + 1);
      return;
    }
    if (typeof n !== 'object' || n === null) return void out.push({ path: p, message: 'a rule must be an object' });
    const r = n as Record<string, unknown>;
    switch (r.type) {
      case 'condition': {
        const left = r.left as Record<string, unknown> | undefined;
        if (typeof left !== 'object' || left === null || left.type !== 'field')
          out.push({ path: `${p}.left`, message: "left must be { type: 'field', path }" });
        else if (typeof left.path !== 'string' || !PATH_RE.test(left.path))
          out.push({
            path: `${p}.left.path`,
            message: 'path must be a dotted attribute name (letters, digits, _ and -)',
          });
        if (typeof r.operator !== 'string' || !OPERATOR_SET.has(r.operator))
          out.push({ path: `${p}.operator`, message: `operator must be one of ${OPERATORS.join(', ')}` });
        else if (!UNARY.has(r.operator)) {
          const right = r.right as Record<string, unknown> | undefined;
          if (typeof right !== 'object' || right === null || right.type !== 'literal' || !('value' in right))
            out.push({ path: `${p}.right`, message: "right must be { type: 'literal', value }" });
          else if ((r.operator === 'in' || r.operator === 'not_in') && !Array.isArray(right.value))
            out.push({ path: `${p}.right.value`, message: `${r.operator} needs a list value` });
        }
        return;
      }
      case 'and':
      case 'or':
        if (!Array.isArray(r.rules))
          return void out.push({ path: `${p}.rules`, message: `a ${r.type} group needs a rules list` });
        for (const [i, x] of r.rules.entries()) walk(x, `${p}.rules[${i}]`, depth + 1);
        return;
      case 'not':
        walk(r.rule, `${p}.rule`, depth + 1);
        return;
      case 'segment':
        if (!allowSegmentNodes)
          return void out.push({ path: `${p}.type`, message: 'segment rules cannot name other segments' });
        if (typeof r.key !== 'string' || r.key.length === 0 || r.key.length > 100)
          out.push({ path: `${p}.key`, message: 'key must name a segment' });
        return;
      default:
        out.push({
          path: `${p}.type`,
          message: "type must be 'condition', 'and', 'or', 'not'" + (allowSegmentNodes ? " or 'segment'" : ''),
        });
    }
  };
  walk(v, path, 0);
  return out;
}

function valueAt(subject: unknown, path: string): unknown {
  let v: unknown = subject;
  for (const part of path.split('.')) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
    v = Object.hasOwn(v, part) ? (v as Record<string, unknown>)[part] : undefined;
  }
  return v;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null)
    return JSON.stringify(a) === JSON.stringify(b);
  return false;
}

/** Numbers compare as numbers, strings as strings (ISO dates sort as text); mixed types never match. */
function compare(a: unknown, b: unknown): number | null {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  return null;
}

function condition(op: string, actual: unknown, expected: unknown): boolean {
  switch (op) {
    case 'equals':
      return equal(actual, expected);
    case 'not_equals':
      return !equal(actual, expected);
    case 'greater_than': {
      const c = compare(actual, expected);
      return c !== null && c > 0;
    }
    case 'greater_than_or_equal': {
      const c = compare(actual, expected);
      return c !== null && c >= 0;
    }
    case 'less_than': {
      const c = compare(actual, expected);
      return c !== null && c < 0;
    }
    case 'less_than_or_equal': {
      const c = compare(actual, expected);
      return c !== null && c <= 0;
    }
    case 'contains':
      if (Array.isArray(actual)) return actual.some((x) => equal(x, expected));
      return typeof actual === 'string' && typeof expected === 'string' && actual.includes(expected);
    case 'not_contains':
      return !condition('contains', actual, expected);
    case 'in':
      return Array.isArray(expected) && expected.some((x) => equal(actual, x));
    case 'not_in':
      return !condition('in', actual, expected);
    case 'starts_with':
      return typeof actual === 'string' && typeof expected === 'string' && actual.startsWith(expected);
    case 'ends_with':
      return typeof actual === 'string' && typeof expected === 'string' && actual.endsWith(expected);
    case 'exists':
      return actual !== undefined && actual !== null;
    case 'not_exists':
      return actual === undefined || actual === null;
    default:
      return false;
  }
}

/** Whether a (checked) rule tree holds for the subject. A list holds when every node does. */
export function matches(rule: unknown, subject: unknown): boolean {
  if (Array.isArray(rule)) return rule.every((r) => matches(r, subject));
  if (typeof rule !== 'object' || rule === null) return false;
  const r = rule as Record<string, any>;
  switch (r.type) {
    case 'condition':
      return condition(r.operator, valueAt(subject, r.left?.path ?? ''), r.right?.value);
    case 'and':
      return Array.isArray(r.rules) && r.rules.every((x: unknown) => matches(x, subject));
    case 'or':
      return Array.isArray(r.rules) && r.rules.some((x: unknown) => matches(x, subject));
    case 'not':
      return !matches(r.rule, subject);
    case 'segment': {
      const segs = valueAt(subject, 'segments');
      return Array.isArray(segs) && segs.includes(r.key);
    }
    default:
      return false;
  }
}

/** A project's segment as the snapshot holds it (active ones only). */
export interface SegmentDef {
  key: string;
  rules: unknown;
}

/**
 * The keys of the segments whose rules the attributes satisfy. A segment without rules
 * matches nobody (an empty audience, not everyone).
 */
export function segmentsOf(segments: readonly SegmentDef[], attributes: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const s of segments) {
    const empty = s.rules === undefined || s.rules === null || (Array.isArray(s.rules) && s.rules.length === 0);
    if (!empty && matches(s.rules, attributes)) out.push(s.key);
  }
  return out;
}

/**
 * The variant a read with this context sees: a forced one (secret preview) if it exists, else
 * the first whose rules hold; null means the default content. A variant without rules is never
 * chosen by rules (it is reachable only by its id).
 */
export function chooseVariant(
  variants: readonly StoredVariant[] | null | undefined,
  t: Targeting,
): StoredVariant | null {
  if (!variants || variants.length === 0) return null;
  if (t.variantId) return t.variantId === DEFAULT_VARIANT ? null : (variants.find((v) => v.id === t.variantId) ?? null);
  for (const v of variants) {
    if (v.rules.length > 0 && matches(v.rules, t)) return v;
  }
  return null;
}
