import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startGqlProject, type GqlProject } from './helpers.ts';
import { graphqlCacheStats } from '../../src/graphql/lru.ts';

/** Issue 10 row 3: what a client sends cannot grow the caches past their byte bounds. */
let server: TestServer;
let p: GqlProject;
let pk: string;

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ]));
});
afterAll(() => server.stop());

function heapMb(): number {
  Bun.gc(true);
  return process.memoryUsage().heapUsed / 1024 / 1024;
}

describe('row 3: caches bounded in bytes', () => {
  // Before: keyed by the full text and bounded by entry count, 120 such documents kept ~300 MB.
  test('120 distinct 0.9 MB documents from a public key leave the heap within the cache bounds', async () => {
    const pad = 'x'.repeat(900_000);
    await p.gql(pk, '{ _schemaVersion }');
    const before = heapMb();
    for (let i = 0; i < 120; i++) {
      const r = await p.gql(pk, `# ${i} ${pad}\n{ _schemaVersion }`, { i });
      expect(r.status).toBe(200);
      expect(r.body.data._schemaVersion).toBeNumber();
    }
    const grown = heapMb() - before;
    const stats = graphqlCacheStats();
    expect(stats.usedBytes).toBeLessThanOrEqual(stats.budgetBytes);
    // One schema's document cache holds at most 32 MB (estimated); the responses are small.
    expect(stats.kinds.documents!.bytes).toBeLessThanOrEqual(32 * 1024 * 1024 * stats.kinds.documents!.caches);
    expect(grown).toBeLessThan(80);
  }, 60_000);

  test('responses are cached under a digest, not under the document and variables', async () => {
    const big = 'v'.repeat(400_000);
    const before = graphqlCacheStats().kinds.responses?.bytes ?? 0;
    for (let i = 0; i < 10; i++) {
      const r = await p.gql(pk, 'query($s: String) { _schemaVersion page(naturalKey: $s) { title } }', {
        s: `${i}${big}`,
      });
      expect(r.headers.get('cache-control')).toStartWith('public');
    }
    const after = graphqlCacheStats().kinds.responses!.bytes;
    // Ten entries of a tiny body: a few KB, not the 8 MB of their variables.
    expect(after - before).toBeLessThan(20_000);
  });
});
