import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from 'graphql-ws';
import { eventually } from '../support/eventually.ts';
import { startTestServer, cli, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { apqBytes } from '../../src/documents/store.ts';
import { get, manifestOf, MODELS, post, pushConfig, pushManifest, sha } from './support.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;

const LIST = 'query Titles { articles(first: 10) { edges { node { title } } } }';
const ONE = 'query One($id: ID!) { article(_id: $id) { _id title summary } }';
const CREATE = 'mutation Create($t: String!) { createArticle(data: { title: $t }) { _id } }';

async function createPublished(title: string): Promise<string> {
  const c = await p.gql(sk, CREATE, { t: title });
  const id = c.body.data.createArticle._id;
  await p.gql(sk, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', { id });
  return id;
}

async function keyWith(documents: string, type = 'public'): Promise<string> {
  const r = await cli(
    server,
    p.ownerKey,
    'api-keys',
    'create',
    '--name',
    `k-${documents}-${Math.random()}`,
    '--type',
    type,
    '--scopes',
    type === 'public' ? 'records:read' : ALL_SECRET.join(','),
    '--project',
    p.projectId,
    '--documents',
    documents,
    '--json',
  );
  expect(r.code).toBe(0);
  return r.json.key;
}

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, MODELS);
  sk = await p.key('sk', ALL_SECRET);
  pk = await p.key('pk', ['records:read']);
  await createPublished('First');
}, 60_000);
afterAll(() => server.stop());

describe('svc documents push|list|rm', () => {
  test('stores valid documents; lists hash mismatches and documents that do not validate as push errors', async () => {
    const bad = 'query Bad { articles { edges { node { nope } } } }';
    const manifest = {
      ...manifestOf(LIST, ONE, CREATE),
      [sha('something else')]: '{ articles { totalCount } }',
      [sha(bad)]: bad,
      'not-a-hash': LIST,
    };
    const r = await pushManifest(server, p.ownerKey, p.projectId, manifest);
    expect(r.code).not.toBe(0);
    expect(r.json.applied).toEqual({ documents: 3 });
    const byPath = Object.fromEntries(r.json.errors.map((e: any) => [e.path, e.message]));
    expect(byPath[`documents["${sha('something else')}"]`]).toContain('hash mismatch');
    expect(byPath[`documents["${sha(bad)}"]`]).toContain('Cannot query field "nope"');
    expect(byPath['documents["not-a-hash"]']).toContain('SHA-256');

    const list = await cli(server, p.ownerKey, 'documents', 'list', '--project', p.projectId, '--json');
    expect(list.code).toBe(0);
    expect(list.json.documents.map((d: any) => d.hash).sort()).toEqual([sha(LIST), sha(ONE), sha(CREATE)].sort());
    expect(list.json.documents.every((d: any) => d.valid)).toBe(true);
  });

  test('rm removes a document: a request naming it then answers PERSISTED_QUERY_NOT_FOUND', async () => {
    const doc = 'query Gone { articles(first: 1) { totalCount } }';
    expect((await pushManifest(server, p.ownerKey, p.projectId, manifestOf(doc))).code).toBe(0);
    expect((await post(server, pk, { documentId: `sha256:${sha(doc)}` })).body.data.articles.totalCount).toBe(1);
    const rm = await cli(server, p.ownerKey, 'documents', 'rm', sha(doc), '--project', p.projectId, '--json');
    expect(rm.code).toBe(0);
    await (await server.svc.projects.get(p.projectId)).reload();
    const after = await post(server, pk, { documentId: `sha256:${sha(doc)}` });
    expect(after.status).toBe(400);
    expect(after.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect((await cli(server, p.ownerKey, 'documents', 'rm', sha(doc), '--project', p.projectId)).code).not.toBe(0);
  });
});

describe('requests naming a document', () => {
  test('documentId and Apollo persistedQuery run the trusted document, compiled before the first request', async () => {
    // Compiled at push for the keys of the project: the cache holds it before anyone asks.
    const stats = () => server.svc.metrics.render();
    expect(await stats()).toMatch(/svc_graphql_cache_entries\{kind="trusted-documents"\} [1-9]/);
    const byId = await post(server, pk, { documentId: `sha256:${sha(LIST)}` });
    expect(byId.status).toBe(200);
    expect(byId.body.data.articles.edges.map((e: any) => e.node.title)).toEqual(['First']);
    const apollo = await post(server, pk, { extensions: { persistedQuery: { version: 1, sha256Hash: sha(LIST) } } });
    expect(apollo.body).toEqual(byId.body);
    const text = await post(server, pk, { query: LIST });
    expect(text.body).toEqual(byId.body);
    expect(await stats()).toContain(
      `svc_trusted_document_hits_total{project="${p.projectId}",document="sha256:${sha(LIST)}"}`,
    );
  });

  test('an unknown id answers PERSISTED_QUERY_NOT_FOUND; a text whose hash is not the named one is refused', async () => {
    const unknown = await post(server, pk, { documentId: `sha256:${sha('nothing')}` });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0]).toMatchObject({
      message: 'PersistedQueryNotFound',
      extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' },
    });
    const mismatch = await post(server, pk, { query: ONE, documentId: `sha256:${sha(LIST)}` });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.errors[0]).toMatchObject({
      message: 'provided sha does not match query',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    const badId = await post(server, pk, { documentId: sha(LIST) });
    expect(badId.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const version = await post(server, pk, { extensions: { persistedQuery: { version: 2, sha256Hash: sha(LIST) } } });
    expect(version.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  test('a trusted-only key may not send text (introspection and /schema included), only trusted ids', async () => {
    const strict = await keyWith('trusted-only');
    const text = await post(server, strict, { query: LIST });
    expect(text.status).toBe(403);
    expect(text.body.errors[0].extensions.code).toBe('DOCUMENT_NOT_TRUSTED');
    const intro = await post(server, strict, { query: '{ __schema { types { name } } }' });
    expect(intro.body.errors[0].extensions.code).toBe('DOCUMENT_NOT_TRUSTED');
    const viaGet = await get(server.apiUrl, strict, { query: '{ __typename }' });
    expect(viaGet.body.errors[0].extensions.code).toBe('DOCUMENT_NOT_TRUSTED');
    const schema = await fetch(`${server.apiUrl}/schema`, { headers: { 'x-api-key': strict } });
    expect(schema.status).toBe(403);
    // The text of a trusted document with its hash is still text.
    expect(
      (
        await post(server, strict, {
          query: ONE + ' ',
          extensions: { persistedQuery: { version: 1, sha256Hash: sha(ONE + ' ') } },
        })
      ).body.errors[0].extensions.code,
    ).toBe('DOCUMENT_NOT_TRUSTED');
    const ok = await post(server, strict, { documentId: `sha256:${sha(LIST)}` });
    expect(ok.status).toBe(200);
    expect(ok.body.data.articles.edges).toHaveLength(1);
  });

  test('a trusted-only key is refused subscriptions over /graphql/ws (they are text); other keys subscribe', async () => {
    const strict = await keyWith('trusted-only');
    const outcome = async (key: string) => {
      const c = createClient({
        url: `${server.apiUrl.replace(/^http/, 'ws')}/graphql/ws`,
        connectionParams: { apiKey: key },
        retryAttempts: 0,
        lazy: false,
        onNonLazyError: () => {},
      });
      const state: { error?: any; subscribed?: boolean } = {};
      const stop = c.subscribe(
        { query: 'subscription { recordChanged(modelKey: "article") { action } }' },
        { next: () => {}, error: (e) => (state.error = e), complete: () => {} },
      );
      try {
        await eventually(() => state.error !== undefined, 1500).catch(() => (state.subscribed = true));
      } finally {
        stop();
        await c.dispose();
      }
      return state;
    };
    const refused = await outcome(strict);
    expect(refused.error[0].extensions.code).toBe('DOCUMENT_NOT_TRUSTED');
    expect((await outcome(pk)).subscribed).toBe(true);
  }, 30_000);

  test('the project setting documentPolicy applies to keys that set none', async () => {
    const set = await pushConfig(server, p.ownerKey, p.projectId, {
      project: { id: p.projectId, tenantId: p.tenantId, settings: { documentPolicy: 'trusted-only' } },
    });
    expect(set.body.errors).toEqual([]);
    await (await server.svc.projects.get(p.projectId)).reload();
    expect((await post(server, pk, { query: LIST })).body.errors[0].extensions.code).toBe('DOCUMENT_NOT_TRUSTED');
    // A key's own setting wins over the project's.
    const open = await keyWith('any');
    expect((await post(server, open, { query: LIST })).status).toBe(200);
    await pushConfig(server, p.ownerKey, p.projectId, {
      project: { id: p.projectId, tenantId: p.tenantId, settings: {} },
    });
    await (await server.svc.projects.get(p.projectId)).reload();
    expect((await post(server, pk, { query: LIST })).status).toBe(200);
  });
});

describe('automatic persisted queries', () => {
  test('unknown hash → PERSISTED_QUERY_NOT_FOUND; resent with text it is stored; the store stays within its byte bound', async () => {
    await pushConfig(server, p.ownerKey, p.projectId, {
      project: { id: p.projectId, tenantId: p.tenantId, settings: { apqMaxBytes: 300 } },
    });
    await (await server.svc.projects.get(p.projectId)).reload();
    const apq = await keyWith('apq');
    const docs = Array.from(
      { length: 5 },
      (_, i) =>
        `query Apq${i} { articles(first: ${i + 1}) { edges { node { title summary _id } } pageInfo { hasNextPage } } }`,
    );
    for (const d of docs) {
      const ext = { persistedQuery: { version: 1, sha256Hash: sha(d) } };
      const miss = await post(server, apq, { extensions: ext });
      expect(miss.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
      const reg = await post(server, apq, { query: d, extensions: ext });
      expect(reg.status).toBe(200);
      const hit = await post(server, apq, { extensions: ext });
      expect(hit.body.data.articles.edges).toHaveLength(1);
      expect(await apqBytes(server.svc.sql, p.projectId)).toBeLessThanOrEqual(300);
    }
    // The oldest registrations were evicted to stay within 300 bytes (each is ~100): a second
    // process (no memory of them) finds the first gone and the last there.
    const other = await startTestServer({ DATABASE_URL: server.databaseUrl });
    try {
      const first = await post(other, apq, {
        extensions: { persistedQuery: { version: 1, sha256Hash: sha(docs[0]!) } },
      });
      expect(first.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
      const last = await post(other, apq, {
        extensions: { persistedQuery: { version: 1, sha256Hash: sha(docs[4]!) } },
      });
      expect(last.status).toBe(200);
    } finally {
      await other.stop();
    }
    // An `any` key runs text with a hash but stores nothing.
    const before = await apqBytes(server.svc.sql, p.projectId);
    const d = 'query NotKept { articles(first: 2) { totalCount } }';
    expect(
      (await post(server, pk, { query: d, extensions: { persistedQuery: { version: 1, sha256Hash: sha(d) } } })).status,
    ).toBe(200);
    expect(
      (await post(server, pk, { extensions: { persistedQuery: { version: 1, sha256Hash: sha(d) } } })).body.errors[0]
        .extensions.code,
    ).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect(await apqBytes(server.svc.sql, p.projectId)).toBe(before);
  }, 60_000);
});

describe('schema pushes re-validate stored documents', () => {
  test('a document that no longer validates is reported at push and refused at run time with a clear code', async () => {
    const doc = 'query Summaries { articles(first: 5) { edges { node { summary } } } }';
    expect((await pushManifest(server, p.ownerKey, p.projectId, manifestOf(doc))).code).toBe(0);
    expect((await post(server, pk, { documentId: `sha256:${sha(doc)}` })).status).toBe(200);
    const without = [{ ...MODELS[0]!, fields: MODELS[0]!.fields.filter((f) => f.key !== 'summary') }];
    const pushed = await pushConfig(server, p.ownerKey, p.projectId, { models: without });
    expect(pushed.body.errors).toContainEqual({
      path: `documents["${sha(doc)}"]`,
      message: expect.stringContaining('no longer validates'),
    });
    const run = await post(server, pk, { documentId: `sha256:${sha(doc)}` });
    expect(run.status).toBe(400);
    expect(run.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(run.body.errors[0].message).toContain(`Trusted document sha256:${sha(doc)}`);
    const list = await cli(server, p.ownerKey, 'documents', 'list', '--project', p.projectId, '--json');
    expect(list.json.documents.find((d: any) => d.hash === sha(doc))).toMatchObject({ valid: false });
    // The schema takes it back: it validates again.
    const back = await pushConfig(server, p.ownerKey, p.projectId, { models: MODELS });
    expect(back.body.errors).toEqual([]);
    expect((await post(server, pk, { documentId: `sha256:${sha(doc)}` })).status).toBe(200);
  });

  test("a config's documents are pushed with it", async () => {
    const doc = 'query FromConfig { articles(first: 3) { totalCount } }';
    const r = await pushConfig(server, p.ownerKey, p.projectId, { documents: manifestOf(doc) });
    expect(r.body.errors).toEqual([]);
    expect(r.body.applied.documents).toBe(1);
    expect((await post(server, pk, { documentId: `sha256:${sha(doc)}` })).body.data.articles.totalCount).toBe(1);
  });
});
