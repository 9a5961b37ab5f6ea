import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlAt, spawnServiceBeside } from '../support/process.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { readStatements } from '../../bench/targets.ts';

/**
 * Read coalescing through the API, on two processes with the response cache off (every read
 * from PostgreSQL): many clients sending the same reads at once get exactly what each would get
 * alone, while the process sends fewer statements than it answers reads; and a write
 * acknowledged by one process is in the next read of the other, though that process is busy
 * with the same read the whole time (a read never shares a statement begun before it came).
 */
let a: TestServer;
let b: { proc: ReturnType<typeof Bun.spawn>; url: string };
let p: GqlProject;
let sk: string;
let pk: string;

beforeAll(async () => {
  a = await startTestServer({ SVC_RESPONSE_CACHE: 'off' });
  p = await gqlProject(
    a,
    [
      {
        key: 'post',
        name: 'Post',
        versioned: false,
        fields: [
          { key: 'title', type: 'text', required: true },
          { key: 'rank', type: 'number', queryable: true },
          { key: 'secret', type: 'text', access: { read: ['service'] } },
          { key: 'body', type: 'text' },
        ],
      },
    ],
    'coalesce-procs',
  );
  sk = await p.key('sk', ALL_SECRET, null, 100_000);
  pk = await p.key('pk', ['records:read'], null, 100_000);
  b = await spawnServiceBeside(a, 'all', { SVC_RESPONSE_CACHE: 'off', SVC_LOG: 'off' });
}, 90_000);

afterAll(async () => {
  if (b?.proc.exitCode === null) b.proc.kill('SIGTERM');
  await b?.proc.exited;
  await a?.stop();
});

/** A process's read statements and coalesced reads, summed over its pools (its /metrics). */
async function readCounts(url: string): Promise<{ statements: number; coalesced: number }> {
  const counts = await readStatements({ url });
  if (!counts) throw new Error(`no /metrics at ${url}`);
  return counts;
}

describe('read coalescing across two processes', () => {
  test('clients sending the same reads at once get what each would get alone, from fewer statements', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const c = await gqlAt(a.apiUrl, sk, `mutation($d: PostInput!) { createPost(data: $d) { _id } }`, {
        d: { title: `Post ${i} — ünïcødé ✓`, rank: i, secret: `s${i}` },
      });
      ids.push(c.data.createPost._id);
    }
    const reads: [string, string, Record<string, unknown>?][] = [
      [pk, '{ posts(first: 10) { edges { node { _id title rank secret } } totalCount } }'],
      [sk, '{ posts(first: 10) { edges { node { _id title rank secret } } totalCount } }'],
      [pk, 'query($id: ID!) { post(_id: $id) { _id title rank } }', { id: ids[3] }],
      [pk, 'query($id: ID!) { post(_id: $id) { _id title rank } }', { id: ids[4] }],
      [sk, '{ posts(first: 3, orderBy: [{ field: rank, direction: DESC }]) { edges { node { title } } } }'],
    ];
    const alone: any[] = [];
    for (const [key, q, v] of reads) alone.push(await gqlAt(b.url, key, q, v));
    expect(alone[0].data.posts.edges[0].node.secret).toBeNull(); // the public key may not read it
    expect(alone[1].data.posts.edges[0].node.secret).toMatch(/^s\d+$/);
    for (const r of alone) expect(r.errors).toBeUndefined();
    const before = await readCounts(b.url);
    const together = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        gqlAt(b.url, reads[i % reads.length]![0], reads[i % reads.length]![1], reads[i % reads.length]![2]),
      ),
    );
    together.forEach((body, i) => {
      expect(body).toEqual(alone[i % reads.length]);
    });
    const after = await readCounts(b.url);
    expect(after.coalesced).toBeGreaterThan(before.coalesced);
    expect(after.statements - before.statements).toBeLessThan(300);
  }, 60_000);

  test('a write acknowledged by one process is in the next read of the other, busy with that read', async () => {
    // A page heavy enough (~1 MB) that its statement is still running when the next one is asked.
    const body = 'x'.repeat(10_000);
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const c = await gqlAt(a.apiUrl, sk, `mutation($d: PostInput!) { createPost(data: $d) { _id } }`, {
        d: { title: 'v0', rank: 2000 + i, body },
      });
      ids.push(c.data.createPost._id);
    }
    const id = ids[0]!;
    const q =
      '{ posts(first: 100, orderBy: [{ field: rank, direction: DESC }]) { edges { node { _id title body } } } }';
    const titleIn = (r: any) => {
      if (!r.data) throw new Error(JSON.stringify(r).slice(0, 300));
      return r.data.posts.edges.find((e: any) => e.node._id === id)?.node.title;
    };
    let stop = false;
    let background = 0;
    // Sixteen clients keep the same read running on b the whole time.
    const busy = Array.from({ length: 16 }, async () => {
      while (!stop) {
        expect(titleIn(await gqlAt(b.url, pk, q))).toMatch(/^v\d+$/);
        background++;
      }
    });
    const before = await readCounts(b.url);
    const stale: string[] = [];
    try {
      for (let i = 1; i <= 40; i++) {
        const w = await gqlAt(
          a.apiUrl,
          sk,
          `mutation($id: ID!, $t: String!) { updatePost(_id: $id, data: { title: $t }) { _id } }`,
          {
            id,
            t: `v${i}`,
          },
        );
        expect(w.errors).toBeUndefined();
        const seen = titleIn(await gqlAt(b.url, pk, q));
        if (seen !== `v${i}`) stale.push(`wrote v${i}, read ${seen}`);
      }
    } finally {
      stop = true;
      await Promise.all(busy);
    }
    expect(stale).toEqual([]);
    expect(background).toBeGreaterThan(50);
    // The background reads did meet: the check above ran while b was coalescing.
    expect((await readCounts(b.url)).coalesced).toBeGreaterThan(before.coalesced);
  }, 90_000);
});
