import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { TestServer } from '../support/server.ts';
import { ALL_SECRET, startProject, type GqlProject } from '../graphql/helpers.ts';
import { insertApiKey } from '../../src/auth/api-keys.ts';

/**
 * fast-check over the release inputs (names, ids, model keys, versions, dates, the `release:`
 * read argument): NUL bytes, lone surrogates, non-ASCII text, huge strings and numbers. Every
 * answer is a result or a stable 4xx code (never INTERNAL_SERVER_ERROR), and a rejected input
 * changes nothing: the release and its items stay as they were.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261128);
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const STABLE = new Set([
  'BAD_USER_INPUT',
  'NOT_FOUND',
  'CONFLICT',
  'GRAPHQL_VALIDATION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'GRAPHQL_PARSE_FAILED',
]);

let server: TestServer;
let p: GqlProject;
let sk: string;
let record: string;
let release: string;

beforeAll(async () => {
  ({ server, p } = await startProject(
    [{ key: 'article', name: 'Article', fields: [{ key: 'title', type: 'text', required: true }] }],
    'rel-fuzz',
  ));
  sk = (
    await insertApiKey(server.svc.sql, {
      tenantId: p.tenantId,
      projectId: p.projectId,
      kind: 'sk',
      name: 'fuzz',
      scopes: ALL_SECRET,
      rateLimit: 10_000_000,
    })
  ).key;
  record = (await p.gql(sk, `mutation { createArticle(data: { title: "kept" }) { _id } }`)).body.data.createArticle._id;
  release = (await p.gql(sk, `mutation { createRelease(name: "fixed") { id } }`)).body.data.createRelease.id;
  await p.gql(
    sk,
    `mutation($r: ID!, $id: ID!) { addToRelease(releaseId: $r, modelKey: "article", recordId: $id) { id } }`,
    { r: release, id: record },
  );
}, 60_000);
afterAll(() => server.stop());

/** Text that cannot be stored or is at the edges: NUL, lone surrogates, astral and RTL text, huge. */
const nasty = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom(
    '',
    ' ',
    '\0',
    'a\0b',
    '\ud800',
    'x\udfffy',
    '\u202eevil',
    '🚀 launch',
    'rel_000000000000000000000000',
    'article',
    '__proto__',
    'a'.repeat(201),
  ),
  fc.integer({ min: 1, max: 5 }).map((n) => 'x'.repeat(n * 200_000)),
);
const version = fc.oneof(fc.constant(null), fc.integer(), fc.constantFrom(0, -1, 1, 2, 2 ** 31 - 1, 1_000_001));

async function send(query: string, variables: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': sk },
    body: JSON.stringify({ query, variables }),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) };
}

function stable(r: { status: number; body: any }): void {
  expect([200, 400, 413]).toContain(r.status);
  for (const e of r.body.errors ?? []) {
    expect(e.extensions?.code === undefined ? e.message : e.extensions.code).not.toBe('INTERNAL_SERVER_ERROR');
    if (e.extensions?.code) expect(STABLE.has(e.extensions.code)).toBe(true);
    expect(e.message).not.toMatch(/select |insert |relation |at .*\.ts/);
  }
}

const snapshot = async () =>
  await server.svc
    .sql`select r.id, r.name, r.status, r.at, i.record_id, i.version from releases r left join release_items i on i.release_id = r.id where r.project_id = ${p.projectId} order by r.id, i.record_id`;

describe('release inputs under fuzz', () => {
  test('createRelease names: stored as given (trimmed) or refused; never a server error', async () => {
    await fc.assert(
      fc.asyncProperty(nasty, async (name) => {
        const r = await send(`mutation($n: String!) { createRelease(name: $n) { id name } }`, { n: name });
        stable(r);
        if (r.body.data?.createRelease) expect(r.body.data.createRelease.name).toBe(name.trim());
        else expect(r.body.errors?.length).toBeGreaterThan(0);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }, 300_000);

  test('add, remove, schedule, publish and read with bad ids, keys, versions and dates change nothing', async () => {
    const before = await snapshot();
    await fc.assert(
      fc.asyncProperty(nasty, nasty, nasty, version, nasty, async (rid, modelKey, recordId, v, at) => {
        const calls = [
          send(
            `mutation($r: ID!, $m: String!, $id: ID!, $v: Int) { addToRelease(releaseId: $r, modelKey: $m, recordId: $id, version: $v) { id } }`,
            { r: rid, m: modelKey, id: recordId, v },
          ),
          send(
            `mutation($r: ID!, $id: ID!, $v: Int) { addToRelease(releaseId: $r, modelKey: "article", recordId: $id, version: $v) { id } }`,
            { r: release, id: recordId, v },
          ),
          send(
            `mutation($r: ID!, $m: String!, $id: ID!) { removeFromRelease(releaseId: $r, modelKey: $m, recordId: $id) { id } }`,
            { r: release, m: modelKey, id: recordId },
          ),
          send(`mutation($r: ID!, $at: DateTime!) { scheduleRelease(id: $r, at: $at) { id } }`, { r: release, at }),
          send(`mutation($r: ID!) { publishRelease(id: $r) { id } }`, { r: rid }),
          send(`mutation($r: ID!) { discardRelease(id: $r) { id } }`, { r: rid }),
          send(`query($r: ID!) { articles(release: $r) { edges { node { title } } } release(id: $r) { id } }`, {
            r: rid,
          }),
        ];
        for (const r of await Promise.all(calls)) stable(r);
      }),
      { seed: SEED + 1, numRuns: RUNS },
    );
    expect(await snapshot()).toEqual(before);
    // The fixed release still works.
    const ok = await send(`query($r: ID!) { articles(release: $r) { edges { node { title } } } }`, { r: release });
    expect(ok.body.data.articles.edges.map((e: any) => e.node.title)).toEqual(['kept']);
  }, 600_000);
});
