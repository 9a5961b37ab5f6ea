import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { get, manifestOf, MODELS, pushConfig, pushManifest, sha } from './support.ts';
import { startCachingProxy, type CachingProxy } from './caching-proxy.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;
let proxy: CachingProxy;
let cdn: ReturnType<typeof Bun.serve>;
const purges: { keys: string | null; tags: string | null; body: any }[] = [];

const LIST = 'query Titles { articles(first: 10) { edges { node { title } } } }';
const CREATE = 'mutation Create($t: String!) { createArticle(data: { title: $t }) { _id } }';
const PUBLISH = 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }';

async function createPublished(title: string): Promise<string> {
  const id = (await p.gql(sk, CREATE, { t: title })).body.data.createArticle._id;
  await p.gql(sk, PUBLISH, { id });
  return id;
}

beforeAll(async () => {
  // The CDN's purge endpoint: records what the service posts to it.
  cdn = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      purges.push({
        keys: req.headers.get('surrogate-key'),
        tags: req.headers.get('cache-tag'),
        body: await req.json(),
      });
      return new Response('ok');
    },
  });
  server = await startTestServer();
  p = await gqlProject(server, MODELS);
  sk = await p.key('sk', ALL_SECRET);
  pk = await p.key('pk', ['records:read']);
  const settings = { cache: { maxAge: 1, staleWhileRevalidate: 0, purgeUrl: `http://127.0.0.1:${cdn.port}/purge` } };
  expect(
    (
      await pushConfig(server, p.ownerKey, p.projectId, {
        project: { id: p.projectId, tenantId: p.tenantId, settings },
      })
    ).body.errors,
  ).toEqual([]);
  expect((await pushManifest(server, p.ownerKey, p.projectId, manifestOf(LIST, CREATE))).code).toBe(0);
  await createPublished('First');
  proxy = startCachingProxy(server.apiUrl);
}, 60_000);
afterAll(async () => {
  proxy.stop();
  cdn.stop(true);
  await server.stop();
});

describe('GET /graphql and HTTP caching', () => {
  test('a public read by documentId: strong ETag, Cache-Control from the project, Vary, surrogate keys; If-None-Match → 304', async () => {
    const r = await get(server.apiUrl, pk, { documentId: `sha256:${sha(LIST)}` });
    expect(r.status).toBe(200);
    expect(r.body.data.articles.edges.map((e: any) => e.node.title)).toEqual(['First']);
    const etag = r.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(r.headers.get('cache-control')).toBe('public, max-age=1, stale-while-revalidate=0');
    expect(r.headers.get('vary')).toContain('x-api-key, X-Project-Id');
    expect(r.headers.get('surrogate-key')).toBe(`svc-p-${p.projectId} svc-d-${sha(LIST)}`);
    expect(r.headers.get('cache-tag')).toBe(`svc-p-${p.projectId},svc-d-${sha(LIST)}`);
    const again = await get(server.apiUrl, pk, { documentId: `sha256:${sha(LIST)}` }, { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.body).toBeNull();
    expect(again.headers.get('etag')).toBe(etag);
    // The same read by text and variables works over GET too (same body, same tag).
    const text = await get(server.apiUrl, pk, { query: LIST, variables: '{}' }, { 'if-none-match': `W/${etag}` });
    expect(text.status).toBe(304);
  });

  test('GET of a mutation is 405 (by text and by trusted id); preview and token-bearing reads are never shared', async () => {
    const m = await get(server.apiUrl, sk, {
      documentId: `sha256:${sha(CREATE)}`,
      variables: JSON.stringify({ t: 'x' }),
    });
    expect(m.status).toBe(405);
    expect(m.headers.get('allow')).toBe('POST');
    expect(m.body.errors[0].extensions.code).toBe('METHOD_NOT_ALLOWED');
    expect((await get(server.apiUrl, sk, { query: CREATE, variables: JSON.stringify({ t: 'x' }) })).status).toBe(405);
    expect((await p.gql(sk, '{ articles(first: 10) { totalCount } }')).body.data.articles.totalCount).toBe(1);

    const preview = await get(server.apiUrl, sk, { query: '{ articles(first: 10, preview: true) { totalCount } }' });
    expect(preview.status).toBe(200);
    expect(preview.headers.get('cache-control')).toBe('no-store');
    expect(preview.headers.get('etag')).toBeNull();

    const reg = await p.gql(
      pk,
      'mutation($e: String!, $p: String!) { registerCustomer(email: $e, password: $p) { accessToken } }',
      { e: `c${Date.now()}@example.com`, p: 'correct horse battery' },
    );
    const token = reg.body.data.registerCustomer.accessToken;
    const mine = await get(
      server.apiUrl,
      pk,
      { documentId: `sha256:${sha(LIST)}` },
      { authorization: `Bearer ${token}` },
    );
    expect(mine.status).toBe(200);
    expect(mine.headers.get('cache-control')).toBe('private, no-store');
    expect(mine.headers.get('etag')).toBeNull();
  });

  test('through a caching proxy: HIT while fresh, 304 revalidation when stale, new content after a publish (and the CDN purge hook is called)', async () => {
    const url = { documentId: `sha256:${sha(LIST)}` };
    const first = await get(proxy.url, pk, url);
    expect(first.headers.get('x-cache')).toBe('MISS');
    const origin = proxy.originRequests;
    const hit = await get(proxy.url, pk, url);
    expect(hit.headers.get('x-cache')).toBe('HIT');
    expect(hit.body).toEqual(first.body);
    expect(proxy.originRequests).toBe(origin);
    // Another key is another cache entry (Vary: x-api-key).
    const otherKey = await p.key('pk', ['records:read']);
    expect((await get(proxy.url, otherKey, url)).headers.get('x-cache')).toBe('MISS');

    await Bun.sleep(1100);
    const revalidated = await get(proxy.url, pk, url);
    expect(revalidated.headers.get('x-cache')).toBe('REVALIDATED');
    expect(proxy.origin304s).toBe(1);
    expect(revalidated.body).toEqual(first.body);

    purges.length = 0;
    await createPublished('Second');
    await eventually(() => purges.length > 0, 5000);
    expect(purges[0]!.keys).toBe(`svc-p-${p.projectId}`);
    expect(purges[0]!.tags).toBe(`svc-p-${p.projectId}`);
    expect(purges[0]!.body.surrogateKeys).toEqual([`svc-p-${p.projectId}`]);

    await Bun.sleep(1100);
    const fresh = await get(proxy.url, pk, url);
    expect(fresh.headers.get('x-cache')).toBe('MISS');
    expect(fresh.body.data.articles.edges.map((e: any) => e.node.title).sort()).toEqual(['First', 'Second']);
    expect(fresh.headers.get('etag')).not.toBe(first.headers.get('etag'));
    expect(proxy.origin304s).toBe(1);
  }, 30_000);
});
