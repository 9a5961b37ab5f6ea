import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';

/**
 * The project's W3C Design Tokens document (pushed verbatim, references such as
 * `{font.size.display1}` kept) and its rendering as CSS custom properties with every reference
 * resolved (GET /v1/design-tokens.css, docs/design-tokens.md). Rendering is pure.
 */
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v);

export async function readDesignTokens(sql: Sql, projectId: string): Promise<Obj | null> {
  // As text, parsed here: the document keeps the key order it was pushed with.
  const [row] = await sql<
    { document: string }[]
  >`select document::text as document from design_tokens where project_id = ${projectId}`;
  return row ? (JSON.parse(row.document) as Obj) : null;
}

interface Token {
  path: string[];
  type: string | undefined;
  value: unknown;
}

/** Every token of the document (objects with `$value`), with its inherited `$type`. */
export function flattenTokens(doc: Obj): Map<string, Token> {
  const out = new Map<string, Token>();
  const walk = (node: Obj, path: string[], inherited: string | undefined) => {
    const type = typeof node.$type === 'string' ? node.$type : inherited;
    if ('$value' in node) {
      out.set(path.join('.'), { path, type, value: node.$value });
      return;
    }
    for (const [k, child] of Object.entries(node))
      if (!k.startsWith('$') && isObj(child)) walk(child, [...path, k], type);
  };
  walk(doc, [], undefined);
  return out;
}

const WHOLE_REF = /^\{([^{}]+)\}$/;
const REF = /\{([^{}]+)\}/g;
const MAX_DEPTH = 32;

class TokenProblem extends Error {}

/**
 * A token's value with references replaced by the values they name: a whole-value reference
 * takes the referenced value as is (objects too); references inside a string are replaced by
 * the referenced token's CSS text. Throws TokenProblem on a cycle or a missing reference.
 */
function resolve(tokens: Map<string, Token>, value: unknown, seen: string[]): unknown {
  if (seen.length > MAX_DEPTH) throw new TokenProblem('references nest too deep');
  if (typeof value === 'string') {
    const whole = WHOLE_REF.exec(value);
    if (whole) return resolveRef(tokens, whole[1]!, seen).value;
    if (!value.includes('{')) return value;
    return value.replace(REF, (_m, name: string) => {
      const t = resolveRef(tokens, name, seen);
      return cssValue(t.type, t.value) ?? '';
    });
  }
  if (Array.isArray(value)) return value.map((v) => resolve(tokens, v, seen));
  if (isObj(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(tokens, v, seen)]));
  return value;
}

function resolveRef(
  tokens: Map<string, Token>,
  name: string,
  seen: string[],
): { type: string | undefined; value: unknown } {
  if (seen.includes(name)) throw new TokenProblem(`reference cycle ${[...seen, name].join(' → ')}`);
  const t = tokens.get(name);
  if (!t) throw new TokenProblem(`{${name}} does not name a token`);
  return { type: t.type, value: resolve(tokens, t.value, [...seen, name]) };
}

/** A reference cycle among the document's tokens, if any (config validation refuses it). */
export function referenceCycle(doc: Obj): string | null {
  const tokens = flattenTokens(doc);
  for (const [name, t] of tokens) {
    try {
      resolve(tokens, t.value, [name]);
    } catch (err) {
      if (err instanceof TokenProblem && err.message.startsWith('reference cycle')) return err.message;
    }
  }
  return null;
}

const num = (v: unknown): string | null => (typeof v === 'number' && Number.isFinite(v) ? String(v) : null);

function dimension(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return num(v);
  if (isObj(v) && num(v.value) !== null && (typeof v.unit === 'string' || v.unit === undefined))
    return `${v.value}${v.unit ?? ''}`;
  return null;
}

function color(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (!isObj(v)) return null;
  if (typeof v.hex === 'string' && (v.alpha === undefined || v.alpha === 1)) return v.hex;
  if (Array.isArray(v.components) && v.components.every((c) => typeof c === 'number' || c === 'none')) {
    const space = typeof v.colorSpace === 'string' ? v.colorSpace : 'srgb';
    const alpha = typeof v.alpha === 'number' && v.alpha !== 1 ? ` / ${v.alpha}` : '';
    return `color(${space} ${v.components.join(' ')}${alpha})`;
  }
  return typeof v.hex === 'string' ? v.hex : null;
}

function fontFamily(v: unknown): string | null {
  const names = Array.isArray(v) ? v : [v];
  if (!names.every((n) => typeof n === 'string')) return null;
  return (names as string[]).map((n) => (/^[A-Za-z-]+$/.test(n) ? n : `"${n.replace(/["\\]/g, '')}"`)).join(', ');
}

function shadowOne(v: unknown): string | null {
  if (!isObj(v)) return typeof v === 'string' ? v : null;
  const parts = [
    v.inset === true ? 'inset' : null,
    dimension(v.offsetX),
    dimension(v.offsetY),
    dimension(v.blur),
    dimension(v.spread),
    color(v.color),
  ];
  return parts.filter((p) => p !== null).join(' ');
}

/** CSS text of a resolved value of a type; null when it has no single-property form. */
export function cssValue(type: string | undefined, v: unknown): string | null {
  switch (type) {
    case 'color':
      return color(v);
    case 'dimension':
    case 'fontSize':
    case 'letterSpacing':
    case 'duration':
      return dimension(v);
    case 'fontFamily':
      return fontFamily(v);
    case 'cubicBezier':
      return Array.isArray(v) && v.length === 4 && v.every((x) => typeof x === 'number')
        ? `cubic-bezier(${v.join(', ')})`
        : typeof v === 'string'
          ? v
          : null;
    case 'shadow':
      return Array.isArray(v)
        ? v
            .map(shadowOne)
            .filter((s) => s)
            .join(', ') || null
        : shadowOne(v);
    case 'border':
      return isObj(v)
        ? [dimension(v.width), typeof v.style === 'string' ? v.style : null, color(v.color)]
            .filter((p) => p !== null)
            .join(' ')
        : typeof v === 'string'
          ? v
          : null;
    case 'transition':
      return isObj(v)
        ? [dimension(v.duration), cssValue('cubicBezier', v.timingFunction), dimension(v.delay)]
            .filter((p) => p !== null)
            .join(' ')
        : typeof v === 'string'
          ? v
          : null;
    case 'gradient':
      return Array.isArray(v)
        ? v
            .map((s) =>
              isObj(s)
                ? `${color(s.color) ?? ''} ${typeof s.position === 'number' ? `${s.position * 100}%` : ''}`.trim()
                : '',
            )
            .join(', ')
        : typeof v === 'string'
          ? v
          : null;
    case 'typography':
      return null;
    default:
      if (typeof v === 'string') return v;
      if (typeof v === 'number' || typeof v === 'boolean') return String(v);
      return dimension(v);
  }
}

const TYPOGRAPHY_PARTS: [string, string][] = [
  ['fontFamily', 'font-family'],
  ['fontSize', 'font-size'],
  ['fontWeight', 'font-weight'],
  ['letterSpacing', 'letter-spacing'],
  ['lineHeight', 'line-height'],
];

/** `--a-b-c`: path segments joined with `-`; characters outside CSS identifiers become `_`. */
export function propertyName(path: readonly string[]): string {
  return `--${path.map((p) => p.replace(/[^A-Za-z0-9_\u0080-\uFFFF-]/g, '_')).join('-')}`;
}

/** Characters that could end the declaration or the rule, or open markup, are never emitted. */
const UNSAFE = /[;{}<>\\\r\n]|\/\*|\*\//;

export interface RenderedCss {
  css: string;
  etag: string;
  /** Tokens left out (cycle, missing reference, no CSS form, unsafe text), by path. */
  skipped: string[];
}

export function renderDesignTokensCss(doc: Obj | null): RenderedCss {
  const lines: string[] = [];
  const skipped: string[] = [];
  if (doc) {
    const tokens = flattenTokens(doc);
    for (const [name, t] of tokens) {
      let value: unknown;
      try {
        value = resolve(tokens, t.value, [name]);
      } catch (err) {
        if (!(err instanceof TokenProblem)) throw err;
        skipped.push(name);
        continue;
      }
      const decls: [string, string | null][] =
        t.type === 'typography' && isObj(value)
          ? TYPOGRAPHY_PARTS.filter(([k]) => value[k] !== undefined).map(([k, css]) => [
              `${propertyName(t.path)}-${css}`,
              cssValue(k, value[k]),
            ])
          : [[propertyName(t.path), cssValue(t.type, value)]];
      for (const [prop, text] of decls) {
        if (text === null || text === '' || UNSAFE.test(text) || text.length > 2000) skipped.push(name);
        else lines.push(`  ${prop}: ${text};`);
      }
    }
  }
  const css = `${doc ? '' : '/* no design tokens have been pushed */\n'}:root {\n${lines.join('\n')}${lines.length ? '\n' : ''}}\n`;
  return {
    css,
    etag: `"${createHash('sha256').update(css).digest('base64url').slice(0, 27)}"`,
    skipped: [...new Set(skipped)],
  };
}
