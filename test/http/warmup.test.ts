import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { manifestOf, MODELS, post, pushManifest, sha } from '../documents/support.ts';

/**
 * The start-up warm-up (src/http/warmup.ts): a process started after documents were pushed reads
 * the plain ones through its own GraphQL handler before its port opens. Two processes on one
 * database: the documents go in through the first, the second warms up on them.
 */
const PLAIN = '{ articles(first: 5) { edges { node { title } } } }';
const WITH_VARIABLES = 'query One($id: ID!) { article(_id: $id) { title } }';
const WRITE = 'mutation Make { createArticle(data: { title: "made by a warm-up" }) { _id } }';

let a: TestServer;
const others: TestServer[] = [];
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  a = await startTestServer();
  p = await gqlProject(a, MODELS);
  await p.key('pk', ['records:read']);
  sk = await p.key('sk', ALL_SECRET);
  const id = (await p.gql(sk, 'mutation { createArticle(data: { title: "Hello" }) { _id } }')).body.data.createArticle
    ._id;
  await p.gql(sk, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', { id });
  const pushed = await pushManifest(a, p.ownerKey, p.projectId, manifestOf(PLAIN, WITH_VARIABLES, WRITE));
  expect(pushed.code).toBe(0);
}, 60_000);
afterAll(async () => {
  for (const s of others) await s.stop();
  await a.stop();
});

async function second(env: Record<string, string> = {}): Promise<TestServer> {
  const s = await startTestServer({ DATABASE_URL: a.databaseUrl, SVC_ROOT_TOKEN: a.rootToken, ...env });
  others.push(s);
  return s;
}

const hitsOf = async (s: TestServer, text: string) =>
  Number(
    new RegExp(`svc_trusted_document_hits_total\\{[^}]*document="sha256:${sha(text)}"[^}]*\\} (\\d+)`).exec(
      await (await fetch(`${s.apiUrl}/metrics`)).text(),
    )?.[1] ?? 0,
  );

describe('start-up warm-up', () => {
  test('a process started after the push reads its plain trusted documents before it listens; nothing of it is counted, charged or written', async () => {
    const b = await second();
    // Only the plain read qualifies: the one with variables has no values, the mutation is a write.
    expect(b.warmup?.reads).toBe(1);
    expect(b.warmup!.requests).toBeGreaterThan(1);
    expect(await hitsOf(b, PLAIN)).toBe(0);

    // A key no one has used: the warm-up's reads were not charged to the project's keys.
    const fresh = await p.key('pk', ['records:read']);
    const r = await post(b, fresh, { documentId: `sha256:${sha(PLAIN)}` });
    expect(r.status).toBe(200);
    expect(r.body.data.articles.edges.map((e: any) => e.node.title)).toEqual(['Hello']);
    const limit = Number(r.headers.get('x-ratelimit-limit'));
    expect(Number(r.headers.get('x-ratelimit-remaining'))).toBe(limit - 1);
    expect(await hitsOf(b, PLAIN)).toBe(1);

    // The write was never run.
    const all = await p.gql(sk, '{ articles(first: 10, preview: true) { edges { node { title } } } }');
    expect(all.body.data.articles.edges.map((e: any) => e.node.title)).toEqual(['Hello']);
  }, 60_000);

  test('SVC_WARMUP_MS=0 turns it off', async () => {
    const c = await second({ SVC_WARMUP_MS: '0' });
    expect(c.warmup).toBeUndefined();
    const r = await post(c, await p.key('pk', ['records:read']), { documentId: `sha256:${sha(PLAIN)}` });
    expect(r.body.data.articles.edges).toHaveLength(1);
  }, 60_000);
});
