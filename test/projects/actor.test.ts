import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { bootstrapProject, startTestServer, type TestServer } from '../support/server.ts';
import { announceSchema, replaceModels } from '../../src/projects/store.ts';
import type { Sql } from '../../src/store/db.ts';
import { eventually } from '../support/eventually.ts';

let a: TestServer;
let b: TestServer;
beforeAll(async () => {
  a = await startTestServer();
  // A second process-like service on the same database: events must cross between them.
  b = await startTestServer({ DATABASE_URL: a.databaseUrl });
});
afterAll(async () => {
  await b.stop();
  await a.stop();
});

const post = { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' as const }] };
const page = { key: 'page', name: 'Page', fields: [{ key: 'slug', type: 'text' as const }] };

async function push(server: TestServer, projectId: string, models: (typeof post)[]): Promise<number | null> {
  const version = await server.svc.sql.begin((tx) => replaceModels(tx as unknown as Sql, projectId, models));
  if (version !== null) await announceSchema(server.svc.bus, projectId, version);
  return version;
}

describe('project actor', () => {
  test("a project's models are invisible from another project", async () => {
    const one = await bootstrapProject(a, 'one');
    const two = await bootstrapProject(a, 'two');
    await push(a, one.projectId, [post]);
    await push(a, two.projectId, [page]);
    const actorOne = await a.svc.projects.get(one.projectId);
    const actorTwo = await a.svc.projects.get(two.projectId);
    expect(actorOne.snapshot.models.map((m) => m.key)).toEqual(['post']);
    expect(actorTwo.snapshot.models.map((m) => m.key)).toEqual(['page']);
    expect(actorOne.snapshot.tenantId).not.toBe(actorTwo.snapshot.tenantId);
  });

  test('an unchanged model set does not bump the schema version', async () => {
    const p = await bootstrapProject(a, 'same');
    const v1 = await push(a, p.projectId, [post]);
    expect(v1).toBe(1);
    expect(await push(a, p.projectId, [post])).toBeNull();
  });

  test('an unchanged model set is recognised whatever order jsonb keeps its keys in', async () => {
    const p = await bootstrapProject(a, 'order');
    const product = {
      key: 'product',
      name: 'Product',
      versioned: false,
      fields: [{ key: 'sku', type: 'text' as const, queryable: true }],
      lookups: [{ keyBy: ['sku'] }],
    };
    expect(await push(a, p.projectId, [product as never])).toBe(1);
    expect(await push(a, p.projectId, [product as never])).toBeNull();
  });

  test('a schema change in one process reaches the project actor of another', async () => {
    const p = await bootstrapProject(a, 'cross');
    await push(a, p.projectId, [post]);
    const remote = await b.svc.projects.get(p.projectId);
    expect(remote.snapshot.models.map((m) => m.key)).toEqual(['post']);
    remote.derived.set('compiled', 'stale');
    await push(a, p.projectId, [post, page]);
    await eventually(() => remote.snapshot.models.length === 2);
    expect(remote.snapshot.schemaVersion).toBe(2);
    // Caches derived from the old schema are dropped with it.
    expect(remote.derived.has('compiled')).toBe(false);
  });

  test('an unknown project is NOT_FOUND and leaves no actor behind', async () => {
    await expect(a.svc.projects.get('prj_missing')).rejects.toThrow('Project not found');
    expect(a.svc.projects.peek('prj_missing')).toBeUndefined();
  });
});
