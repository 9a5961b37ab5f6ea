import fc from 'fast-check';
import {
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLSchema,
} from 'graphql';
import type { ModelDef } from '../../../src/projects/types.ts';

/**
 * fast-check arbitraries for the GraphQL fuzz suite (test/graphql/fuzz.test.ts): documents and
 * variables generated against a project's schema as a client sees it (introspected), valid
 * enough to reach execution most of the time and hostile in what they carry: random nesting,
 * fragments, aliases, directives, unicode, huge and forged values; plus mangled and random text.
 */
/**
 * Draws from entropy fast-check generates (so a run replays from its seed and path, and
 * shrinking walks towards all-zero entropy, the plainest document). The entropy seeds a small
 * PRNG for the rest of the document: drawing every choice through fast-check's combinators
 * cost ~4 ms per document, too slow for 10,000 in CI.
 */
class Draw {
  #s: number;
  constructor(entropy: readonly number[]) {
    let h = 0x9e3779b9;
    for (const e of entropy) h = Math.imul(h ^ e, 0x85ebca6b) ^ (h >>> 13);
    this.#s = h >>> 0;
  }
  /** mulberry32 */
  #next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min + 1));
  }
  chance(p: number): boolean {
    return this.#next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(0, xs.length - 1)]!;
  }
  name(): string {
    const first = '_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    const rest = `${first}0123456789`;
    let out = first[this.int(0, first.length - 1)]!;
    for (let i = this.int(0, 10); i > 0; i--) out += rest[this.int(0, rest.length - 1)];
    return out;
  }
  /** Any code points: ASCII, control characters, astral planes, and now and then a lone surrogate. */
  unicode(max = 40): string {
    let out = '';
    for (let i = this.int(0, max); i > 0; i--) {
      const k = this.int(0, 9);
      const cp =
        k < 4
          ? this.int(0x20, 0x7e)
          : k < 5
            ? this.int(0, 0x1f)
            : k < 8
              ? this.int(0xa0, 0xffff)
              : this.int(0x10000, 0x10ffff);
      // String.fromCharCode keeps lone surrogates (0xd800-0xdfff) as they are.
      out += cp > 0xffff ? String.fromCodePoint(cp) : String.fromCharCode(cp);
    }
    return out;
  }
  json(depth = 0): unknown {
    const k = this.int(0, depth > 2 ? 3 : 6);
    if (k === 0) return null;
    if (k === 1) return this.chance(0.5);
    if (k === 2) return this.chance(0.5) ? this.int(-1000, 1000) : this.int(-1e6, 1e6) / 7;
    if (k === 3) return this.chance(0.8) ? this.name() : this.unicode(10);
    if (k === 4) return Array.from({ length: this.int(0, 3) }, () => this.json(depth + 1));
    return Object.fromEntries(
      Array.from({ length: this.int(0, 3) }, () => [
        this.chance(0.9) ? this.name() : this.unicode(5),
        this.json(depth + 1),
      ]),
    );
  }
}

function cursorish(d: Draw): string {
  const k = d.int(0, 2);
  if (k === 0) return Buffer.from(JSON.stringify(d.json()) ?? 'null').toString('base64url');
  if (k === 1)
    return Buffer.from(JSON.stringify(['s', d.pick([0, 1, -1, 1.5, 1e300, 2 ** 53, '3'])])).toString('base64url');
  return d.unicode(60);
}

/** Strings a hostile client would send. */
function hostileString(d: Draw): string {
  switch (d.int(0, 11)) {
    case 0:
      return 'a\u0000b';
    case 1:
      return `x${'\ud800'}y`;
    case 2:
      return '\udc00';
    case 3:
      return 'x'.repeat(d.chance(0.95) ? 1_000 : d.pick([20_000, 200_000]));
    case 4:
      return d.unicode();
    case 5:
      return d.unicode(20);
    case 6:
      return cursorish(d);
    case 7:
      return d.pick([
        '',
        ' ',
        'en',
        'de-AT',
        'zz_ZZ',
        'not a locale',
        "'; drop table records; --",
        '%_\\',
        '2024-02-30',
        '9999-99-99T99:99',
        '1e999',
        'NaN',
        '-0',
        'null',
        'rec_0000',
        '{}',
        '[]',
      ]);
    case 8:
      return `${'\u{1F600}'.repeat(d.int(1, 50))}\u202e\ufeff`;
    default:
      return d.name();
  }
}

function hostileNumber(d: Draw): number {
  return d.pick([0, -1, 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 1, 1e308, -1e308, 1.5, 5e-324, 100, 101, 20, -0]);
}

/** Deep or wide JSON (the JSON scalar, where trees): values that test the input limits. */
function hostileJson(d: Draw, depth = 0): unknown {
  const k = d.int(0, 9);
  if (k === 0) {
    let v: unknown = d.pick([1, 'x', null, {}]);
    const n = d.pick([10, 63, 65, 200, 3_000]);
    for (let i = 0; i < n; i++) v = d.chance(0.5) ? [v] : { a: v };
    return v;
  }
  if (k === 1) return Array.from({ length: d.pick([100, 5_000, 30_000]) }, (_, i) => i);
  if (k === 2) return { [hostileString(d)]: hostileString(d) };
  if (k === 3 && depth < 3) return { a: hostileJson(d, depth + 1), b: [hostileJson(d, depth + 1)] };
  return d.json();
}

/** A value for an input type: usually well-typed, sometimes wrong, sometimes hostile. */
function inputValue(d: Draw, type: GraphQLInputType, depth: number, nonNull = false): unknown {
  if (d.chance(0.01)) return d.pick([null, 'wrong', 12, true, [], {}]);
  if (isNonNullType(type)) return inputValue(d, type.ofType, depth, true);
  if (!nonNull && d.chance(0.05)) return null;
  if (isListType(type)) {
    // Wide lists at the top only: a wide list of wide lists is a gigabyte, not a test.
    const n = depth === 0 && d.chance(0.015) ? d.pick([500, 20_000]) : d.int(0, 3);
    // The items of a wide list are plain (depth 9 turns off the wide and deep generators):
    // a wide list of wide trees would be gigabytes of JSON in the test itself.
    const item = n > 100 ? inputValue(d, type.ofType, 9) : undefined;
    return Array.from({ length: n }, () => (n > 100 ? item : inputValue(d, type.ofType, depth + 1)));
  }
  if (isEnumType(type)) return d.chance(0.05) ? 'NOT_A_VALUE' : d.pick(type.getValues()).name;
  if (isInputObjectType(type)) {
    const fields = Object.values(type.getFields());
    const out: Record<string, unknown> = {};
    // Recursive where types: sometimes very deep or very wide.
    if (/Where$/.test(type.name) && depth < 2 && d.chance(0.03)) {
      const leaf = fields.find((f) => !['AND', 'OR', 'NOT'].includes(f.name));
      const base = leaf ? { [leaf.name]: inputValue(d, leaf.type, 9) } : {};
      if (d.chance(0.5)) {
        let w: unknown = base;
        // 20,000 levels (issue 27 item 13): past JSON.stringify's stack, the service's and ours
        // (the suite sends variables with test/support/deep-json.ts).
        const op = d.pick(['NOT', 'AND', 'OR']);
        for (let i = 0, n = d.pick([17, 100, 3_000, 20_000]); i < n; i++) w = op === 'NOT' ? { NOT: w } : { [op]: [w] };
        return w;
      }
      return { OR: Array.from({ length: d.pick([200, 1_001, 20_000]) }, () => base) };
    }
    for (const f of fields) {
      if (isNonNullType(f.type) || (depth < 4 && d.chance(0.4))) out[f.name] = inputValue(d, f.type, depth + 1);
    }
    if (d.chance(0.02)) out[d.name()] = 1;
    return out;
  }
  if (isScalarType(type)) {
    switch (type.name) {
      case 'Int':
        return d.chance(0.8) ? d.int(0, 30) : hostileNumber(d);
      case 'Float':
        return d.chance(0.7) ? d.int(-5, 1000) / 4 : hostileNumber(d);
      case 'Boolean':
        return d.chance(0.5);
      case 'DateTime':
        return d.chance(0.7) || depth >= 9 ? new Date(d.int(0, 4_000_000_000) * 1000).toISOString() : hostileString(d);
      case 'JSON':
      case 'RichText':
        return d.chance(0.6) || depth > 4 ? d.json() : hostileJson(d);
      // Items of a wide list (depth 9) stay short: 20,000 copies of a 200 KB string is 4 GB.
      default:
        return d.chance(0.6) ? d.name() : depth >= 9 ? d.unicode(20) : hostileString(d);
    }
  }
  return null;
}

/** A literal in GraphQL syntax (strings escaped by JSON, which GraphQL strings accept). */
function literal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : '0';
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`;
  return `{ ${Object.entries(v as object)
    .map(([k, x]) => `${/^[_A-Za-z][_0-9A-Za-z]*$/.test(k) ? k : '_bad'}: ${literal(x)}`)
    .join(', ')} }`;
}

function enumLiteral(type: GraphQLInputType, v: unknown): string {
  const named = getNamedType(type);
  if (isEnumType(named) && typeof v === 'string' && /^[_A-Za-z][_0-9A-Za-z]*$/.test(v)) return v;
  if (isInputObjectType(named) && v && typeof v === 'object' && !Array.isArray(v)) {
    const fields = named.getFields();
    return `{ ${Object.entries(v)
      .map(
        ([k, x]) =>
          `${/^[_A-Za-z][_0-9A-Za-z]*$/.test(k) ? k : '_bad'}: ${fields[k] ? enumLiteral(fields[k]!.type, x) : literal(x)}`,
      )
      .join(', ')} }`;
  }
  if (Array.isArray(v))
    return `[${v.map((x) => enumLiteral(getNullableType(type) && isListType(getNullableType(type)) ? (getNullableType(type) as any).ofType : type, x)).join(', ')}]`;
  return literal(v);
}

function typeRef(t: GraphQLInputType): string {
  if (isNonNullType(t)) return `${typeRef(t.ofType)}!`;
  if (isListType(t)) return `[${typeRef(t.ofType)}]`;
  return (t as GraphQLNamedType).name;
}

export interface FuzzDocument {
  query: string;
  variables: Record<string, unknown>;
  operationName?: string;
  /** Which key sends it: the public key (reads) or the secret key (reads and writes). */
  secret: boolean;
}

class Builder {
  readonly vars: string[] = [];
  readonly values: Record<string, unknown> = {};
  readonly fragments: string[] = [];
  #n = 0;
  constructor(
    readonly d: Draw,
    readonly schema: GraphQLSchema,
  ) {}

  args(field: GraphQLField<unknown, unknown>): string {
    const parts: string[] = [];
    for (const a of field.args as readonly GraphQLArgument[]) {
      if (!isNonNullType(a.type) && !this.d.chance(0.35)) continue;
      const v = inputValue(this.d, a.type, 0);
      // Unpaired surrogates cannot be written in a GraphQL string: those travel as variables.
      if (this.d.chance(0.5) || /\\ud[89a-f]/i.test(JSON.stringify(v) ?? '')) {
        const name = `v${this.#n++}`;
        this.vars.push(`$${name}: ${typeRef(a.type)}`);
        this.values[name] = v;
        parts.push(`${a.name}: $${name}`);
      } else {
        // Literals of any size: documents over the token limit are part of the test.
        parts.push(`${a.name}: ${enumLiteral(a.type, v)}`);
      }
    }
    if (this.d.chance(0.02)) parts.push(`${this.d.name()}: 1`);
    return parts.length ? `(${parts.join(', ')})` : '';
  }

  directives(): string {
    if (!this.d.chance(0.1)) return '';
    const which = this.d.chance(0.97) ? this.d.pick(['include', 'skip']) : this.d.pick(['deprecated', 'unknown']);
    if (which === 'deprecated' || which === 'unknown') return ` @${which}`;
    if (this.d.chance(0.5)) {
      const name = `v${this.#n++}`;
      this.vars.push(`$${name}: Boolean!`);
      this.values[name] = this.d.chance(0.5);
      return ` @${which}(if: $${name})`;
    }
    return ` @${which}(if: ${this.d.chance(0.5)})`;
  }

  selection(type: GraphQLNamedType, depth: number): string {
    if (!isCompositeType(type)) return '';
    const out: string[] = [];
    const used = new Set<string>();
    const n = this.d.int(1, depth > 6 ? 2 : 4);
    for (let i = 0; i < n; i++) {
      const k = this.d.int(0, 19);
      if (k === 0 && isAbstractType(type)) {
        const possible = this.schema.getPossibleTypes(type);
        if (possible.length) {
          const t = this.d.pick(possible);
          out.push(`... on ${t.name}${this.directives()} { ${this.selection(t, depth + 1) || '__typename'} }`);
          continue;
        }
      }
      if (k === 1 && this.fragments.length < 6) {
        const name = `F${this.fragments.length}`;
        this.fragments.push('');
        const body = this.selection(type, depth + 1) || '__typename';
        this.fragments[Number(name.slice(1))] = `fragment ${name} on ${type.name} { ${body} }`;
        const times = this.d.chance(0.2) ? this.d.int(2, 5) : 1;
        for (let t = 0; t < times; t++) out.push(`...${name}${this.directives()}`);
        continue;
      }
      if (k === 2) {
        out.push(this.d.chance(0.8) ? '__typename' : this.d.name());
        continue;
      }
      if (isAbstractType(type) || !isObjectType(type)) {
        // Interface fields are valid on the interface itself.
      }
      const fields = Object.values(
        (type as { getFields(): Record<string, GraphQLField<unknown, unknown>> }).getFields(),
      );
      if (!fields.length) continue;
      const f = this.d.pick(fields);
      // A name used twice in one set gets an alias (else validation refuses most documents).
      const alias = this.d.chance(0.15)
        ? `${this.d.chance(0.9) ? this.d.name() : 'a'}: `
        : used.has(f.name)
          ? `${f.name}_${i}: `
          : '';
      used.add(f.name);
      const inner = getNamedType(f.type);
      let sub = '';
      if (isCompositeType(inner)) {
        // Deep on purpose sometimes: past the depth limit, and without a selection (invalid).
        if (this.d.chance(0.005)) sub = '';
        else
          sub =
            depth < this.d.pick([3, 6, 9, 15])
              ? ` { ${this.selection(inner, depth + 1) || '__typename'} }`
              : ' { __typename }';
      }
      out.push(`${alias}${f.name}${this.args(f)}${this.directives()}${sub}`);
    }
    return out.join(' ');
  }
}

/** One document: an operation generated against the schema, or text mangled from one. */
export function documentArbitrary(schema: GraphQLSchema, models: readonly ModelDef[]): fc.Arbitrary<FuzzDocument> {
  return fc.array(fc.nat(), { minLength: 4, maxLength: 4 }).map((entropy) => {
    const d = new Draw(entropy);
    const kind = d.int(0, 99);
    if (kind < 3) return { query: d.unicode(200), variables: {}, secret: d.chance(0.5) };
    if (kind < 6) {
      const t = d.pick(['__Schema', '__Type', 'Query', ...models.map((m) => m.key)]);
      return {
        query: `{ __schema { types { name fields { name type { name ofType { name } } } } } __type(name: ${JSON.stringify(t)}) { name kind fields { name } } }`,
        variables: {},
        secret: false,
      };
    }
    const b = new Builder(d, schema);
    const mutation = kind >= 88 && schema.getMutationType();
    const root = mutation ? schema.getMutationType()! : schema.getQueryType()!;
    const body = b.selection(root, 1) || '_schemaVersion';
    const name = d.chance(0.3) ? d.name() : '';
    const head = `${mutation ? 'mutation' : 'query'}${name ? ` ${name}` : ''}${b.vars.length ? `(${b.vars.join(', ')})` : ''}`;
    let query = `${head} { ${body} } ${b.fragments.join(' ')}`;
    if (kind >= 96) {
      // Mangled: a cut, a doubled slice or a stray character somewhere.
      const at = d.int(0, query.length);
      query = d.chance(0.5)
        ? query.slice(0, at)
        : `${query.slice(0, at)}${d.pick(['{', '}', '(', '$', '"', '...', '@', '\u0000', '#'])}${query.slice(at)}`;
    }
    const variables = d.chance(0.03) ? { ...b.values, [d.name()]: hostileJson(d) } : b.values;
    return {
      query,
      variables,
      operationName: name && d.chance(0.9) ? name : d.chance(0.02) ? 'Nope' : undefined,
      secret: !!mutation || d.chance(0.6),
    };
  });
}

/** A project to fuzz: every field type, references between models, queryable fields, lookups. */
export function fuzzModels(): ModelDef[] {
  return [
    {
      key: 'article',
      name: 'Article',
      fields: [
        { key: 'title', type: 'text', queryable: true, required: true },
        { key: 'body', type: 'richtext' },
        { key: 'slug', type: 'text', queryable: true },
        { key: 'views', type: 'number', queryable: true },
        { key: 'live', type: 'boolean', queryable: true },
        { key: 'published', type: 'date', queryable: true },
        {
          key: 'status',
          type: 'enum',
          queryable: true,
          config: {
            options: [
              { value: 'draft', label: 'Draft' },
              { value: 'in-review', label: 'Review' },
              { value: 'done', label: 'Done' },
            ],
            default: 'draft',
          },
        },
        { key: 'author', type: 'reference', config: { modelKey: 'person' } },
        { key: 'related', type: 'reference', config: { modelKey: 'article' } },
        { key: 'tags', type: 'select', queryable: true, config: { optionModelKey: 'tag', multiple: true } },
        { key: 'seo', type: 'model', config: { modelKey: 'seo' } },
        { key: 'cover', type: 'image' },
        { key: 'blocks', type: 'flexible' },
        { key: 'keywords', type: 'list', itemType: 'text', queryable: true },
        { key: 'scores', type: 'list', itemType: 'number' },
        { key: 'extra', type: 'json' },
        { key: 'secret', type: 'text', access: { read: ['service'], write: ['admin'] } },
      ],
      lookups: [{ keyBy: ['slug'] }],
    },
    {
      key: 'person',
      name: 'Person',
      fields: [
        { key: 'name', type: 'text', queryable: true },
        { key: 'friend', type: 'reference', config: { modelKey: 'person' } },
        { key: 'any', type: 'reference' },
      ],
    },
    { key: 'tag', name: 'Tag', versioned: false, fields: [{ key: 'label', type: 'text', queryable: true }] },
    {
      key: 'seo',
      name: 'Seo',
      fields: [
        { key: 'description', type: 'text' },
        { key: 'nested', type: 'model', config: { modelKey: 'seo' } },
      ],
    },
  ];
}
