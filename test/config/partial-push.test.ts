import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { folder, minimal, read } from './support.ts';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

const push = (key: string, dir: string, ...more: string[]) => cli(server, key, 'push', '--dir', dir, '--json', ...more);
const modelKeys = async (projectId: string) =>
  (
    await server.svc.sql<{ key: string }[]>`select key from models where project_id = ${projectId} order by position`
  ).map((r) => r.key);
const page = (extra: Record<string, unknown> = {}) => ({
  key: 'page',
  name: 'Page',
  fields: [{ key: 'title', type: 'text' }],
  ...extra,
});

describe('svc push applies what is valid (CONTRACT §3)', () => {
  test('an invalid model and an invalid key are skipped and listed; every valid entry applies; the exit code is non-zero', async () => {
    const p = await bootstrapProject(server, 'partial');
    const dir = folder({
      'svc.config.json': minimal(p, {
        models: [
          page(),
          { key: 'broken', name: 'Broken', fields: [{ key: 'x', type: 'strng' }] },
          { key: 'post', name: 'Post', fields: [{ key: 'body', type: 'richtext' }] },
        ],
        apiKeys: [
          { name: 'website', keyType: 'public', envVar: 'SVC_PUBLIC_KEY', scopes: ['records:read'] },
          { name: 'weird', keyType: 'shared', envVar: 'SVC_WEIRD_KEY', scopes: ['records:read'] },
        ],
        operations: [{ key: 'notify', endpoint: 'https://hooks.example/notify' }],
      }),
    });
    const r = await push(p.ownerKey, dir);
    expect(r.code).toBe(1);
    expect(r.json.errors.map((e: { path: string }) => e.path)).toEqual([
      'models[1].fields[0].type',
      'apiKeys[1].keyType',
    ]);
    expect(r.json.applied).toMatchObject({ models: 2, apiKeys: 1, operations: 1 });
    expect(await modelKeys(p.projectId)).toEqual(['page', 'post']);
    expect(read(dir, '.env')).toContain('SVC_PUBLIC_KEY=pk_');
    expect(read(dir, '.env')).not.toContain('SVC_WEIRD_KEY');
    // The valid models are served.
    const schema = (await (
      await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/config`, {
        headers: { authorization: `Bearer ${p.ownerKey}` },
      })
    ).json()) as { models: { key: string }[] };
    expect(schema.models.map((m) => m.key)).toEqual(['page', 'post']);
  });

  test('a model made invalid keeps its live definition; entries that depend on a skipped one are skipped too', async () => {
    const p = await bootstrapProject(server, 'keep');
    expect(
      (await push(p.ownerKey, folder({ 'svc.config.json': minimal(p, { models: [page({ name: 'Live page' })] }) })))
        .code,
    ).toBe(0);
    const r = await push(
      p.ownerKey,
      folder({
        'svc.config.json': minimal(p, {
          models: [
            page({ name: 'Changed', fields: [{ key: 'title', type: 'nope' }] }),
            { key: 'card', name: 'Card', fields: [{ key: 'pick', type: 'select', config: { optionModelKey: 'bad' } }] },
            { key: 'bad', name: 'Bad', fields: [{ key: 'k', type: 'text', access: { write: [] } }] },
            { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] },
          ],
        }),
      }),
    );
    expect(r.code).toBe(1);
    const paths = r.json.errors.map((e: { path: string }) => e.path);
    expect(paths).toContain('models[0].fields[0].type');
    expect(paths).toContain('models[2].fields[0].access.write');
    expect(paths.some((x: string) => x.startsWith('models[1]'))).toBe(true);
    const live = await server.svc.sql<
      { key: string; definition: { name: string } }[]
    >`select key, definition from models where project_id = ${p.projectId} order by key`;
    expect(live.map((m) => [m.key, m.definition.name])).toEqual([
      ['page', 'Live page'],
      ['post', 'Post'],
    ]);
  });

  test('--atomic applies nothing when anything is invalid', async () => {
    const p = await bootstrapProject(server, 'atomic');
    const dir = folder({
      'svc.config.json': minimal(p, {
        models: [page(), { key: 'broken', name: 'Broken', fields: [{ key: 'x', type: 'strng' }] }],
        apiKeys: [{ name: 'website', keyType: 'public', envVar: 'SVC_PUBLIC_KEY', scopes: ['records:read'] }],
      }),
    });
    const r = await push(p.ownerKey, dir, '--atomic');
    expect(r.code).toBe(1);
    expect(r.json.applied).toEqual({});
    expect(r.json.errors.map((e: { path: string }) => e.path)).toEqual(['models[1].fields[0].type']);
    expect(await modelKeys(p.projectId)).toEqual([]);
    expect(existsSync(join(dir, '.env'))).toBe(false);
  });

  test('an error outside the entries (the config itself) applies nothing', async () => {
    const p = await bootstrapProject(server, 'fatal');
    const r = await push(p.ownerKey, folder({ 'svc.config.json': minimal(p, { name: '', models: [page()] }) }));
    expect(r.code).toBe(1);
    expect(r.json.applied).toEqual({});
    expect(await modelKeys(p.projectId)).toEqual([]);
  });
});
