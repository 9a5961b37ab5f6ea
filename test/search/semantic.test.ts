import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { startTestServer, type TestServer } from '../support/server.ts';
import { spawnBeside } from '../support/process.ts';
import { opsProject, type OpsProject } from '../operations/support.ts';

/**
 * Semantic search (issue 19): embeddings in PostgreSQL, nearest neighbours by cosine similarity
 * on the storage path the server has (pgvector + HNSW, or real[] with exact cosine) and on the
 * forced real[] fallback; HYBRID fuses full-text and vector rankings; two processes.
 */
let auto: TestServer;
let forced: TestServer;
const procs: Subprocess[] = [];

beforeAll(async () => {
  auto = await startTestServer();
  forced = await startTestServer({ SVC_VECTOR_STORE: 'array' });
}, 30_000);

afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await Promise.all([auto.stop(), forced.stop()]);
});

const MODELS = [
  { key: 'doc', name: 'Doc', fields: [{ key: 'title', type: 'text' }] },
  { key: 'note', name: 'Note', fields: [{ key: 'title', type: 'text' }] },
];

interface Fixture {
  p: OpsProject;
  write: string;
  read: string;
  ids: Record<string, string>;
}

/** Five published docs and a note, each with a 3-d vector; "draft" is never published. */
async function fixture(server: TestServer, name: string): Promise<Fixture> {
  const p = await opsProject(server, name);
  await p.push({ models: MODELS });
  const write = await p.key([
    'records:read',
    'records:write',
    'records:publish',
    'records:delete',
    'search:read',
    'search:semantic:read',
    'search:semantic:write',
    'drafts:read',
  ]);
  const read = await p.key(['records:read', 'search:read', 'search:semantic:read']);
  const docs: [string, string, number[], boolean, string][] = [
    ['apple', 'Apple pie recipe', [1, 0, 0], true, 'doc'],
    ['pear', 'Pear tart', [0.9, 0.2, 0], true, 'doc'],
    ['car', 'Fast cars', [0, 1, 0], true, 'doc'],
    ['boat', 'Apple boats', [0, 0, 1], true, 'doc'],
    ['draft', 'Unpublished apple', [1, 0.01, 0], false, 'doc'],
    ['memo', 'Apple memo', [0.8, 0, 0.3], true, 'note'],
  ];
  const ids: Record<string, string> = {};
  for (const [k, title, vector, publish, model] of docs) {
    const T = model === 'doc' ? 'Doc' : 'Note';
    const c = await p.gql(write, `mutation($t: String) { create${T}(data: { title: $t }) { _id } }`, { t: title });
    const id = c.data[`create${T}`]._id;
    ids[k] = id;
    if (publish) await p.gql(write, `mutation($id: ID!) { publish${T}Version(_id: $id) { _id } }`, { id });
    const e = await p.gql(
      write,
      'mutation($id: ID!, $v: [Float!]!) { upsertEmbedding(recordId: $id, vector: $v, model: "test-3d") { recordId modelKey model dimensions } }',
      { id, v: vector },
    );
    expect(e.data.upsertEmbedding).toEqual({ recordId: id, modelKey: model, model: 'test-3d', dimensions: 3 });
  }
  return { p, write, read, ids };
}

const SIMILAR =
  'query($v: [Float!]!, $keys: [String!], $first: Int, $preview: Boolean) { similarRecords(vector: $v, modelKeys: $keys, first: $first, preview: $preview) { score record { _id _modelKey } } }';

async function nearest(f: Fixture, vars: Record<string, unknown>, key = f.read): Promise<string[]> {
  const r = await f.p.gql(key, SIMILAR, vars);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  const byId = Object.fromEntries(Object.entries(f.ids).map(([k, v]) => [v, k]));
  return r.data.similarRecords.map((h: any) => byId[h.record._id]);
}

for (const [label, server] of [
  ['detected store', () => auto],
  ['forced real[] fallback', () => forced],
] as const) {
  describe(`semantic search on the ${label}`, () => {
    let f: Fixture;
    beforeAll(async () => {
      f = await fixture(server(), label.replace(/\W/g, ''));
    }, 30_000);

    test('the known nearest neighbour ranks first; scores are cosine similarities; modelKeys and stage filter', async () => {
      expect(await nearest(f, { v: [1, 0.05, 0], first: 3 })).toEqual(['apple', 'pear', 'memo']);
      const r = await f.p.gql(f.read, SIMILAR, { v: [2, 0, 0], first: 1 });
      expect(r.data.similarRecords[0].score).toBeCloseTo(1, 5);
      expect(await nearest(f, { v: [0, 0, 5], first: 1 })).toEqual(['boat']);
      expect(await nearest(f, { v: [1, 0.05, 0], keys: ['doc'], first: 2 })).toEqual(['apple', 'pear']);
      // The draft is found only in preview (drafts:read).
      expect(await nearest(f, { v: [1, 0.01, 0], first: 1, preview: true }, f.write)).toEqual(['draft']);
      expect(await nearest(f, { v: [1, 0.01, 0], first: 10 })).not.toContain('draft');
    });

    test('HYBRID fuses full-text and vector ranks; SEMANTIC ranks by vector alone; FULLTEXT is unchanged', async () => {
      const q =
        'query($q: String!, $m: SearchMode, $v: [Float!]) { searchDocs(query: $q, mode: $m, vector: $v, first: 3) { totalCount edges { node { _id } } } }';
      const names = (r: any) =>
        r.data.searchDocs.edges.map((e: any) => Object.entries(f.ids).find(([, id]) => id === e.node._id)![0]);
      // "apple" matches apple and boat by text; the vector points at boat only.
      // Text alone ranks apple first ("Apple pie recipe" is shorter); fused, boat leads, then apple.
      expect(names(await f.p.gql(f.read, q, { q: 'apple' }))[0]).toBe('apple');
      expect(names(await f.p.gql(f.read, q, { q: 'apple', m: 'HYBRID', v: [0, 0, 1] }))).toEqual(['boat', 'apple']);
      expect(names(await f.p.gql(f.read, q, { q: '', m: 'SEMANTIC', v: [0, 1, 0] }))[0]).toBe('car');
      const text = names(await f.p.gql(f.read, q, { q: 'apple' }));
      expect(text.sort()).toEqual(['apple', 'boat']);
      const missing = await f.p.gql(f.read, q, { q: 'apple', m: 'HYBRID' });
      expect(missing.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      const generic = await f.p.gql(
        f.read,
        'query($v: [Float!]) { searchRecords(query: "apple", mode: HYBRID, vector: $v, modelKeys: ["note"]) { edges { node { _id } } } }',
        { v: [1, 0, 0] },
      );
      expect(generic.data.searchRecords.edges.map((e: any) => e.node._id)).toEqual([f.ids.memo]);
    });

    test('wrong dimension, NaN, Infinity, zero, too long, unknown record: refused with nothing stored', async () => {
      const [before] = await server().svc.sql`select count(*)::int as n, max(updated_at) as at from embeddings`;
      const up =
        'mutation($id: ID!, $v: [Float!]!, $m: String!) { upsertEmbedding(recordId: $id, vector: $v, model: $m) { dimensions } }';
      const cases: [string, Record<string, unknown>, string][] = [
        [
          'dimension',
          { id: f.ids.apple, v: [1, 0], m: 'test-3d' },
          'vector has 2 dimensions; embeddings of model test-3d in this project have 3',
        ],
        ['NaN', { id: f.ids.apple, v: [1, 'NaN', 0], m: 'test-3d' }, ''],
        ['zero', { id: f.ids.apple, v: [0, 0, 0], m: 'test-3d' }, 'vector must not be all zeros'],
        [
          'too long',
          { id: f.ids.apple, v: new Array(2001).fill(0.5), m: 'other' },
          'vector must be a list of 1 to 2000 numbers',
        ],
        ['huge', { id: f.ids.apple, v: [1e39, 0, 0], m: 'test-3d' }, 'outside the range of a 32-bit float'],
        ['model name', { id: f.ids.apple, v: [1, 0, 0], m: 'bad model name!' }, 'model must name the embedding model'],
        ['unknown record', { id: 'rec_nope', v: [1, 0, 0], m: 'test-3d' }, 'not found'],
      ];
      for (const [name, vars, message] of cases) {
        const r = await f.p.gql(f.write, up, vars);
        expect(`${name}: ${r.errors?.[0]?.extensions?.code}`).toBe(
          `${name}: ${name === 'unknown record' ? 'NOT_FOUND' : 'BAD_USER_INPUT'}`,
        );
        if (message) expect(r.errors[0].message).toContain(message);
      }
      // Infinity: JSON has none, but 1e999 parses to it.
      const res = await fetch(`${server().apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': f.write },
        body: `{"query":${JSON.stringify(up)},"variables":{"id":"${f.ids.apple}","v":[1e999,0,0],"m":"test-3d"}}`,
      });
      const inf = (await res.json()) as any;
      expect(inf.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      const sim = await f.p.gql(f.read, SIMILAR, { v: [1, 0, 0, 0] });
      expect(sim.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      const [after] = await server().svc.sql`select count(*)::int as n, max(updated_at) as at from embeddings`;
      expect(after).toEqual(before!);
      const [models] = await server().svc.sql`select count(*)::int as n from embedding_models where model = 'other'`;
      expect(models!.n).toBe(0);
    });

    test('scopes: write needs search:semantic:write (secret keys); read needs search:semantic:read', async () => {
      const noWrite = await f.p.key(['records:read', 'search:semantic:read']);
      const r = await f.p.gql(
        noWrite,
        'mutation($id: ID!) { upsertEmbedding(recordId: $id, vector: [1,0,0], model: "test-3d") { dimensions } }',
        { id: f.ids.apple },
      );
      expect(r.errors[0].message).toBe('missing required scope: search:semantic:write');
      const noRead = await f.p.key(['records:read', 'search:read']);
      expect((await f.p.gql(noRead, SIMILAR, { v: [1, 0, 0] })).errors[0].message).toBe(
        'missing required scope: search:semantic:read',
      );
      const pub = await f.p.key(['records:read', 'search:semantic:read'], 'pk');
      expect(
        (await f.p.gql(pub, 'mutation { upsertEmbedding(recordId: "x", vector: [1], model: "m") { dimensions } }'))
          .errors[0].message,
      ).toStartWith('Cannot query field');
      expect(await nearest(f, { v: [1, 0.05, 0], first: 1 }, pub)).toEqual(['apple']);
    });

    test('deleteEmbedding and record deletion remove vectors', async () => {
      const del = await f.p.gql(f.write, 'mutation($id: ID!) { deleteEmbedding(recordId: $id) }', { id: f.ids.pear });
      expect(del.data.deleteEmbedding).toBe(1);
      expect(await nearest(f, { v: [0.9, 0.2, 0], keys: ['doc'], first: 2 })).toEqual(['apple', 'car']);
      await f.p.gql(f.write, 'mutation($id: ID!) { deleteDoc(_id: $id) }', { id: f.ids.apple });
      expect(await nearest(f, { v: [1, 0, 0], keys: ['doc'], first: 1 })).toEqual(['car']);
    });
  });
}

test('GET /health names the vector store; SVC_VECTOR_STORE=array forces real[]', async () => {
  const h = (await (await fetch(`${forced.apiUrl}/health`)).json()) as any;
  expect(h.status).toBe('ok');
  expect(h.details).toEqual({
    vectorSearch: 'real[] (exact cosine in SQL)',
    vectorSearchReason: 'SVC_VECTOR_STORE=array',
  });
  const [row] = await auto.svc
    .sql`select exists (select 1 from pg_available_extensions where name = 'vector') as available`;
  const a = (await (await fetch(`${auto.apiUrl}/health`)).json()) as any;
  expect(a.details.vectorSearch).toBe(row!.available ? 'pgvector (HNSW, cosine)' : 'real[] (exact cosine in SQL)');
});

test('two processes: a vector written through one is searched through the other', async () => {
  const f = await fixture(forced, 'cross');
  const { proc, url: other } = await spawnBeside(forced);
  procs.push(proc);
  const ask = async (v: number[]) => {
    const res = await fetch(`${other}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': f.read },
      body: JSON.stringify({ query: SIMILAR, variables: { v, first: 1 } }),
    });
    return ((await res.json()) as any).data.similarRecords.map((h: any) => h.record._id);
  };
  expect(await ask([0, 1, 0])).toEqual([f.ids.car]);
  // Move "boat" next to the query through the first process; the second sees it at once (never cached).
  await f.p.gql(
    f.write,
    'mutation($id: ID!) { upsertEmbedding(recordId: $id, vector: [0, 1, 0.01], model: "test-3d") { dimensions } }',
    { id: f.ids.boat },
  );
  await f.p.gql(
    f.write,
    'mutation($id: ID!) { upsertEmbedding(recordId: $id, vector: [0, 0.2, 1], model: "test-3d") { dimensions } }',
    { id: f.ids.car },
  );
  expect(await ask([0, 1, 0])).toEqual([f.ids.boat]);
}, 60_000);
