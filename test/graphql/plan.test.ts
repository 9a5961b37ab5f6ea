import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isNonNullType,
  isObjectType,
  isScalarType,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import type { KeyPrincipal } from '../../src/auth/principal.ts';
import { contextFor, execute } from '../../src/graphql/execute.ts';
import { maskErrors } from '../../src/graphql/errors.ts';
import { planOf, runPlan } from '../../src/graphql/plan.ts';
import { prepareFor } from '../../src/graphql/prepare.ts';
import { targetOf, type Target } from '../../src/graphql/schema-entries.ts';
import type { ModelDef } from '../../src/projects/types.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { fuzzModels } from './fuzz/documents.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from './helpers.ts';

/**
 * Plans of plain queries (src/graphql/plan.ts) answer exactly as the compiled query does: the
 * same JSON for every plain document fast-check draws, over records whose values fast-check
 * draws too (NUL bytes, lone surrogates, non-ASCII, huge strings, odd numbers, deep JSON), and
 * after a schema push that leaves stored values of the wrong type (then the walk gives up and
 * the compiled query's errors are the answer). Documents that are not plain get no plan.
 */
let server: TestServer;
let p: GqlProject;
let sk: string;
let pkPrincipal: KeyPrincipal;
let skPrincipal: KeyPrincipal;

const MODELS = fuzzModels();

const principal = async (key: string) => (await server.svc.gate.authenticate({ headers: { 'x-api-key': key } })).key;

/** A value of the article's scalar fields, drawn with the hostile strings of the other fuzz suites. */
const hostileText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfffy', 'é ü 中文 🎉', '"quoted" \\ back', ''),
  fc.string({ maxLength: 5 }).map((s) => s.repeat(2_000)),
);
const articleData = fc.record(
  {
    title: hostileText,
    slug: hostileText,
    views: fc.oneof(
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.constantFrom(-0, 1e21, 5e-324),
    ),
    live: fc.boolean(),
    published: fc.constantFrom('2026-01-02', '1999-12-31T23:59:59.000Z'),
    status: fc.constantFrom('draft', 'in-review', 'done'),
    keywords: fc.array(hostileText, { maxLength: 4 }),
    scores: fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { maxLength: 4 }),
    extra: fc.jsonValue({ maxDepth: 6 }),
  },
  { requiredKeys: ['title'] },
);

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, MODELS);
  const key = (kind: 'pk' | 'sk', scopes: string[]) => p.key(kind, scopes, null, 10_000_000);
  const pk = await key('pk', ['records:read', 'search:read']);
  sk = await key('sk', ALL_SECRET);
  pkPrincipal = await principal(pk);
  skPrincipal = await principal(sk);
  // Every escape JSON.stringify makes, each alone in a string the walk writes itself, and what it
  // leaves as is (fast-check's sample may draw none of them); first, so that every list read's
  // first page holds them.
  const escapes = [
    'say "hi"',
    'C:\\dir',
    'line\nbreak',
    'bell\u0007',
    'unit\u001f',
    'é 中文 🎉 \u2028\u2029 </script>',
  ];
  for (const title of [...escapes, '"', '\\']) {
    const e = await p.gql(sk, 'mutation($d: ArticleInput!) { createArticle(data: $d) { _id } }', {
      d: { title, slug: title, keywords: [title, 'plain'] },
    });
    await p.gql(sk, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', {
      id: e.body.data.createArticle._id,
    });
  }
  // Values the write path refuses (NUL bytes, lone surrogates) are left out; the rest is stored.
  const samples = fc.sample(articleData, { numRuns: 24, seed: 20261128 });
  let stored = 0;
  for (const d of samples) {
    const a = await p.gql(sk, 'mutation($d: ArticleInput!) { createArticle(data: $d) { _id } }', { d });
    if (!a.body.data?.createArticle) {
      expect(a.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      continue;
    }
    stored++;
    await p.gql(sk, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', {
      id: a.body.data.createArticle._id,
    });
  }
  expect(stored).toBeGreaterThanOrEqual(8);
  // An article without the optional fields: the enum's default applies on read, others are null.
  const bare = await p.gql(sk, 'mutation { createArticle(data: { title: "bare" }) { _id } }');
  await p.gql(sk, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', {
    id: bare.body.data.createArticle._id,
  });
}, 60_000);
afterAll(() => server.stop());

/** Both ways, each with its own context; JSON of data and masked errors. */
async function bothWays(target: Target, who: KeyPrincipal, query: string) {
  const prepared = prepareFor(target, { query });
  if (!prepared.ok) return { planned: false as const };
  const json = (r: { data?: unknown; errors?: readonly unknown[] }) =>
    JSON.stringify({ data: r.data, errors: r.errors ? maskErrors(r.errors as never, true) : undefined });
  const compiled = () => prepared.compiled.query(undefined, contextFor(server.svc, who, target), {});
  const reference = json(await compiled());
  if (!prepared.plan) return { planned: false as const, reference };
  let fellBack = false;
  const ctx = contextFor(server.svc, who, target);
  const walked = json(
    await runPlan(prepared.plan, ctx, () => {
      fellBack = true;
      return prepared.compiled.query(undefined, ctx, {});
    }),
  );
  return { planned: true as const, reference, walked, fellBack };
}

/** Plain documents over the view's schema: one root field with a resolver, fields without one below. */
function plainDocument(schema: GraphQLSchema) {
  const root = schema.getQueryType()!;
  // Lists of records mostly (they answer data; item reads without arguments answer errors).
  const roots = Object.values(root.getFields()).filter(
    (f) =>
      f.resolve &&
      !f.args.some((a) => isNonNullType(a.type)) &&
      isObjectType(getNamedType(f.type)) &&
      (f.args.some((a) => a.name === 'first') || f.name === 'article'),
  );
  return fc
    .record({ pick: fc.nat(), seed: fc.array(fc.nat(), { minLength: 8, maxLength: 40 }) })
    .map(({ pick, seed }) => {
      let i = 0;
      const next = () => seed[i++ % seed.length]!;
      const f = roots[pick % roots.length]!;
      const selection = (type: GraphQLObjectType, depth: number): string => {
        const fields = Object.values(type.getFields()).filter(
          (x) =>
            !x.resolve &&
            !x.args.length &&
            (isScalarType(getNamedType(x.type)) ||
              isEnumType(getNamedType(x.type)) ||
              (isObjectType(getNamedType(x.type)) && depth < 4)),
        );
        const chosen = fields.filter(() => next() % 3 !== 0).slice(0, 8);
        const parts = (chosen.length ? chosen : fields.slice(0, 1)).map((x) => {
          const alias = next() % 5 === 0 ? `a${next() % 100}_${x.name}: ` : '';
          const named = getNamedType(x.type);
          return isObjectType(named) ? `${alias}${x.name} { ${selection(named, depth + 1)} }` : `${alias}${x.name}`;
        });
        return parts.join(' ') || '__typename';
      };
      const args = f.args.some((a) => a.name === 'first') ? `(first: ${next() % 20})` : '';
      return `{ ${f.name}${args} { ${selection(getNamedType(f.type) as GraphQLObjectType, 1)} } }`;
    });
}

describe('plans of plain queries', () => {
  test('every plain document answers the same JSON by plan and by compiled query', async () => {
    let planned = 0;
    let walkedThrough = 0;
    for (const who of [pkPrincipal, skPrincipal]) {
      const target = await targetOf(server.svc, who);
      const docs = fc.sample(plainDocument(target.entry.view.schema), { numRuns: 150, seed: 7 });
      for (const query of docs) {
        const r = await bothWays(target, who, query);
        if (!r.planned) continue;
        planned++;
        if (!r.fellBack) walkedThrough++;
        expect({ query, json: r.walked }).toEqual({ query, json: r.reference });
      }
    }
    // The test can fail: most drawn documents are plain and walk through.
    expect(planned).toBeGreaterThan(150);
    expect(walkedThrough).toBeGreaterThan(100);
  }, 60_000);

  test('stored values of the wrong type after a schema push: the walk gives up, the compiled query answers', async () => {
    const changed: ModelDef[] = MODELS.map((m) =>
      m.key !== 'article'
        ? m
        : {
            ...m,
            fields: m.fields.map((f) =>
              f.key === 'title'
                ? { ...f, type: 'number' as const }
                : f.key === 'views'
                  ? { ...f, type: 'text' as const, required: true }
                  : f.key === 'live'
                    ? { ...f, type: 'number' as const }
                    : f,
            ),
          },
    );
    await p.setModels(changed);
    try {
      const target = await targetOf(server.svc, skPrincipal);
      const docs = [
        '{ articles(first: 20) { edges { node { title } } } }',
        '{ articles(first: 20) { edges { node { views live } } } }',
        '{ articles(first: 20) { edges { node { _id slug status keywords scores } } } }',
      ];
      let fellBack = 0;
      for (const query of docs) {
        const r = await bothWays(target, skPrincipal, query);
        expect(r.planned).toBe(true);
        if (!r.planned) continue;
        expect(r.walked).toBe(r.reference);
        if (r.fellBack) fellBack++;
      }
      // A text in a Float field is an error only the compiled query writes.
      expect(fellBack).toBeGreaterThanOrEqual(1);
      expect(JSON.parse((await bothWays(target, skPrincipal, docs[0]!)).reference!).errors.length).toBeGreaterThan(0);
    } finally {
      await p.setModels(MODELS);
    }
  }, 30_000);

  test('documents that are not plain get no plan', async () => {
    const target = await targetOf(server.svc, skPrincipal);
    const schema = target.entry.view.schema;
    const not = [
      'query($n: Int) { articles(first: $n) { edges { node { title } } } }',
      '{ articles(first: 1) { edges { node { ...F } } } } fragment F on Article { title }',
      '{ articles(first: 1) { edges { node { title @include(if: true) } } } }',
      '{ articles(first: 1) { edges { node { title } } } tags(first: 1) { edges { node { label } } } }',
      '{ articles(first: 1) { edges { node { __typename title } } } }',
      '{ articles(first: 1) { edges { node { author { _id } } } } }',
      '{ articles(first: 1) { edges { node { t: title t: slug } } } }',
      '{ __schema { queryType { name } } }',
      'mutation { createTag(data: { label: "x" }) { _id } }',
    ];
    for (const query of not) {
      const prepared = prepareFor(target, { query });
      expect({ query, plan: prepared.ok ? prepared.plan : 'not prepared' }).toEqual({
        query,
        plan: prepared.ok ? null : 'not prepared',
      });
    }
    const plain = prepareFor(target, { query: '{ articles(first: 3) { edges { node { _id title views } } } }' });
    expect(plain.ok && plain.plan !== null).toBe(true);
    expect(planOf(schema, plain.ok ? plain.op : (undefined as never))).not.toBeNull();
  });

  test('an uncached read over HTTP runs the plan and answers as before', async () => {
    const query = '{ articles(first: 5) { edges { node { _id title slug views live status } } } }';
    const r = await execute(server.svc, skPrincipal, { query }, { method: 'POST', customer: null });
    const target = await targetOf(server.svc, skPrincipal);
    const ref = await bothWays(target, skPrincipal, query);
    expect(ref.planned).toBe(true);
    expect(r.body).toBe(JSON.stringify(JSON.parse(ref.reference!)));
    const http = await p.gql(sk, query);
    expect(http.status).toBe(200);
    expect(JSON.stringify(http.body)).toBe(r.body!);
  });
});
