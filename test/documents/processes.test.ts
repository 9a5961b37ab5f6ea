import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { spawnServiceBeside } from '../support/process.ts';
import type { Subprocess } from 'bun';
import { manifestOf, MODELS, post, pushManifest, sha } from './support.ts';

/**
 * Two processes on one PostgreSQL: a document pushed through one is served — compiled ahead — by
 * the other without a restart (it hears project.changed on the bus); a process started later
 * compiles the stored documents at start-up, before its first request.
 */
let a: TestServer;
/** A second OS process (its caches and /metrics are its own). */
let b: { proc: Subprocess; apiUrl: string };
let p: GqlProject;
let pk: string;

const trustedEntries = async (s: { apiUrl: string }) =>
  Number(
    /svc_graphql_cache_entries\{kind="trusted-documents"\} (\d+)/.exec(
      await (await fetch(`${s.apiUrl}/metrics`)).text(),
    )?.[1] ?? 0,
  );

async function spawn(): Promise<{ proc: Subprocess; apiUrl: string }> {
  const s = await spawnServiceBeside(a, 'api', { SVC_LOG: 'off' }, 60_000);
  return { proc: s.proc, apiUrl: s.url };
}

beforeAll(async () => {
  a = await startTestServer();
  b = await spawn();
  p = await gqlProject(a, MODELS);
  pk = await p.key('pk', ['records:read']);
  const sk = await p.key('sk', ALL_SECRET);
  const id = (await p.gql(sk, 'mutation { createArticle(data: { title: "Hello" }) { _id } }')).body.data.createArticle
    ._id;
  await p.gql(sk, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', { id });
}, 90_000);
afterAll(async () => {
  b.proc.kill();
  await b.proc.exited;
  await a.stop();
});

describe('trusted documents across processes', () => {
  test('pushed through one process, served by the other without a restart, compiled before its first request there', async () => {
    const doc = 'query Across { articles(first: 5) { edges { node { title } } } }';
    // B serves the project already (its snapshot is loaded): it must hear about the new document.
    expect((await post(b, pk, { query: '{ articles(first: 1) { totalCount } }' })).status).toBe(200);
    const before = await trustedEntries(b);
    expect((await pushManifest(a, p.ownerKey, p.projectId, manifestOf(doc))).code).toBe(0);
    await eventually(async () => (await trustedEntries(b)) > before, 5000);
    const compiled = await trustedEntries(b);
    const r = await post(b, pk, { documentId: `sha256:${sha(doc)}` });
    expect(r.status).toBe(200);
    expect(r.body.data.articles.edges[0].node.title).toBe('Hello');
    // The request found the document compiled: nothing was added to the cache by it.
    expect(await trustedEntries(b)).toBe(compiled);
  }, 30_000);

  test('a process started after the push compiles the stored documents at start-up', async () => {
    const c = await spawn();
    try {
      // Nothing has been asked of this process yet: what its caches hold was compiled at start-up.
      const compiled = await trustedEntries(c);
      expect(compiled).toBeGreaterThan(0);
      const doc = 'query Across { articles(first: 5) { edges { node { title } } } }';
      expect((await post(c, pk, { documentId: `sha256:${sha(doc)}` })).body.data.articles.edges).toHaveLength(1);
      expect(await trustedEntries(c)).toBe(compiled);
    } finally {
      c.proc.kill();
      await c.proc.exited;
    }
  }, 90_000);

  test('a document removed through one process is gone in the other', async () => {
    const doc = 'query Across { articles(first: 5) { edges { node { title } } } }';
    const res = await fetch(`${a.apiUrl}/v1/control/projects/${p.projectId}/documents/${sha(doc)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${p.ownerKey}` },
    });
    expect(res.status).toBe(200);
    await eventually(async () => (await post(b, pk, { documentId: `sha256:${sha(doc)}` })).status === 400, 5000);
    expect((await post(b, pk, { documentId: `sha256:${sha(doc)}` })).body.errors[0].extensions.code).toBe(
      'PERSISTED_QUERY_NOT_FOUND',
    );
  });
});
