import { randomBytes } from 'node:crypto';
import { BadUserInput } from '../errors.ts';

/**
 * SQL literals for write transactions sent as ONE simple-protocol message (`begin; …; commit`;
 * tx.ts): PostgreSQL then runs them without ever waiting for the client. Bun's client, given the
 * statements as separate pipelined extended-protocol queries, left the backend idle in
 * transaction (ClientRead) between BEGIN, the statements and COMMIT (docs/decisions.md). So
 * parameters are inlined as literals: strings dollar-quoted with a tag that cannot occur in them
 * (no escaping rules involved, whatever standard_conforming_strings says), numbers and booleans
 * as such, arrays as ARRAY[…].
 */
export function literal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new BadUserInput('numbers must be finite');
    return `(${String(v)})`;
  }
  if (Array.isArray(v)) return `array[${v.map(literal).join(',')}]`;
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  // PostgreSQL text cannot hold NUL, and a NUL would end the query message.
  if (s.includes('\0')) throw new BadUserInput('text must not contain NUL characters');
  // The body ends at the first occurrence of the closing tag: it must be the one appended. A
  // plain `$q$` serves almost every value; otherwise the tag is random, so a value cannot be
  // built to defeat it, and one check (linear in the value) suffices — a search through
  // predictable tags would be quadratic in a value stuffed with them.
  // `$q$` can only end the body early if it occurs in the value or the value ends with `$q`
  // (which the appended tag completes); checked without copying the value.
  if (!s.includes('$q$') && !s.endsWith('$q')) return `$q$${s}$q$`;
  let tag: string;
  do tag = `q${randomBytes(12).toString('hex')}`;
  while (!closesAtEnd(s, tag));
  return `$${tag}$${s}$${tag}$`;
}

/** True when `$tag$` first occurs in `s + $tag$` at the appended one (overlaps included). */
function closesAtEnd(s: string, tag: string): boolean {
  return (s + `$${tag}$`).indexOf(`$${tag}$`) === s.length;
}

/**
 * A statement text cut at its `$n` placeholders: `parts[k]`, then parameter `slots[k]` (0-based),
 * …, then the last part. Statement texts are a small set of templates (write.ts, read.ts, …), so
 * each is cut once: `inline` was a regex replace with a callback per placeholder, 1.26 µs for a
 * create's statement against 0.27 µs cut once (Bun 1.4, this box), and 4 % of the service's
 * samples in the write bench (docs/decisions.md, "Writes, session 5: service CPU per mutation").
 */
interface Template {
  parts: string[];
  slots: number[];
}

const templates = new Map<string, Template>();
/** Bounded: texts built with values in them would otherwise grow it without end. */
const MAX_TEMPLATES = 512;
const MAX_TEMPLATE_CHARS = 16_384;

function cut(text: string): Template {
  const parts: string[] = [];
  const slots: number[] = [];
  let last = 0;
  for (let i = text.indexOf('$'); i !== -1; i = text.indexOf('$', i + 1)) {
    // `$` then digits, as many as follow (`$10` is parameter 10): what /\$(\d+)/g matched.
    let j = i + 1;
    while (j < text.length && text.charCodeAt(j) >= 48 && text.charCodeAt(j) <= 57) j++;
    if (j === i + 1) continue;
    parts.push(text.slice(last, i));
    slots.push(Number(text.slice(i + 1, j)) - 1);
    last = j;
    i = j - 1;
  }
  parts.push(text.slice(last));
  return { parts, slots };
}

function templateOf(text: string): Template {
  let t = templates.get(text);
  if (t) return t;
  t = cut(text);
  if (text.length <= MAX_TEMPLATE_CHARS) {
    if (templates.size >= MAX_TEMPLATES) templates.clear();
    templates.set(text, t);
  }
  return t;
}

/** A statement's text with its `$n` placeholders replaced by literals. */
export function inline(st: { text: string; params: unknown[] }): string {
  const { parts, slots } = templateOf(st.text);
  let out = parts[0]!;
  for (let k = 0; k < slots.length; k++) {
    const i = slots[k]!;
    if (i < 0 || i >= st.params.length) throw new Error(`statement has no parameter $${i + 1}`);
    out += literal(st.params[i]) + parts[k + 1]!;
  }
  return out;
}
