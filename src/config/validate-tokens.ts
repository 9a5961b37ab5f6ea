import { Checker, join, type Obj } from './check.ts';
import { referenceCycle } from './design-tokens.ts';

/**
 * W3C Design Tokens: groups nest; a token is an object with `$value`; `$type` may sit on the
 * token or on an enclosing group. Values are stored verbatim, so references like
 * `{font.size.display1}` are only checked to point at a token of the same document.
 */
const TOKEN_TYPES = [
  'color',
  'dimension',
  'fontFamily',
  'fontWeight',
  'fontSize',
  'lineHeight',
  'letterSpacing',
  'duration',
  'cubicBezier',
  'number',
  'string',
  'boolean',
  'strokeStyle',
  'border',
  'transition',
  'shadow',
  'gradient',
  'typography',
];
const GROUP_PROPS = new Set(['$type', '$description', '$extensions', '$deprecated', '$schema']);
const REF_RE = /\{([^{}]+)\}/g;

export function checkDesignTokens(c: Checker, v: unknown): void {
  const doc = c.object(v, 'designTokens');
  if (!doc) return;
  const tokens = new Map<string, { value: unknown; path: string }>();
  walk(c, doc, 'designTokens', [], undefined, tokens);
  let missing = false;
  for (const [, t] of tokens) {
    for (const ref of references(t.value)) {
      if (!tokens.has(ref)) {
        missing = true;
        c.add(`${t.path}.$value`, `reference {${ref}} does not name a token of this document`);
      }
    }
  }
  const cycle = missing ? null : referenceCycle(doc);
  if (cycle) c.add('designTokens', `the design tokens have a ${cycle}`);
}

function references(value: unknown): string[] {
  if (typeof value === 'string') return [...value.matchAll(REF_RE)].map((m) => m[1]!);
  if (Array.isArray(value)) return value.flatMap(references);
  if (value && typeof value === 'object') return Object.values(value).flatMap(references);
  return [];
}

function walk(
  c: Checker,
  node: Obj,
  path: string,
  names: string[],
  inherited: unknown,
  tokens: Map<string, { value: unknown; path: string }>,
): void {
  const type = node.$type ?? inherited;
  if (node.$type !== undefined && (typeof node.$type !== 'string' || !TOKEN_TYPES.includes(node.$type))) {
    c.add(
      `${path}.$type`,
      `$type ${JSON.stringify(node.$type)} is not a design token type; use one of ${TOKEN_TYPES.join(', ')}`,
    );
  }
  if ('$value' in node) {
    const value = node.$value;
    if (value === null || value === undefined || value === '') c.add(`${path}.$value`, '$value must not be empty');
    else if (typeof type === 'string' && !checkValue(type, value)) {
      c.add(`${path}.$value`, `$value ${JSON.stringify(value).slice(0, 80)} is not a valid ${type} value`);
    }
    tokens.set(names.join('.'), { value, path });
    return;
  }
  if (names.length > 0 && Object.keys(node).every((k) => k.startsWith('$'))) {
    c.add(`${path}.$value`, 'a token needs $value (a group needs at least one token or group inside)');
    return;
  }
  for (const [k, child] of Object.entries(node)) {
    if (k.startsWith('$')) {
      if (!GROUP_PROPS.has(k)) c.add(join(path, k), `${k} is not a group property; a token needs $value`);
      continue;
    }
    if (k.includes('.') || k.includes('{') || k.includes('}')) {
      c.add(join(path, k), `token and group names must not contain ".", "{" or "}"`);
      continue;
    }
    if (!c.isObject(child)) {
      c.add(join(path, k), `${k} must be a token (an object with $value) or a group`);
      continue;
    }
    walk(c, child, join(path, k), [...names, k], type, tokens);
  }
}

const isRef = (v: unknown) => typeof v === 'string' && /^\{[^{}]+\}$/.test(v);

function checkValue(type: string, v: unknown): boolean {
  if (isRef(v)) return true;
  switch (type) {
    case 'color':
      return (
        (typeof v === 'string' &&
          (/^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i.test(v) || /^(rgb|rgba|hsl|hsla|oklch|color)\(/.test(v))) ||
        (typeof v === 'object' && v !== null)
      );
    case 'dimension':
    case 'fontSize':
    case 'letterSpacing':
      return (
        (typeof v === 'string' && /^-?\d+(\.\d+)?(px|rem|em|%)?$/.test(v)) ||
        (typeof v === 'object' && v !== null && 'value' in v) ||
        v === 0
      );
    case 'duration':
      return (typeof v === 'string' && /^\d+(\.\d+)?m?s$/.test(v)) || (typeof v === 'object' && v !== null);
    case 'number':
    case 'lineHeight':
      return typeof v === 'number' || (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v));
    case 'fontWeight':
      return typeof v === 'number' || typeof v === 'string';
    case 'fontFamily':
      return typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
    case 'cubicBezier':
      return Array.isArray(v) && v.length === 4 && v.every((x) => typeof x === 'number');
    default:
      return true;
  }
}
