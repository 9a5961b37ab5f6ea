import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { memberKey } from '../auth/support.ts';
import { folder, minimal, read } from './support.ts';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

const push = (key: string, dir: string, ...more: string[]) => cli(server, key, 'push', '--dir', dir, '--json', ...more);
const count = async (table: string, projectId: string) =>
  Number(
    (await server.svc.sql.unsafe(`select count(*)::int as n from ${table} where project_id = $1`, [projectId]))[0]!.n,
  );

describe('push rules', () => {
  test('a config with ten mistakes gets ten errors and nothing is applied', async () => {
    const p = await bootstrapProject(server, 'ten');
    const dir = folder({
      'svc.config.json': minimal(p, {
        name: 7, // 1
        models: [
          {
            key: 'a',
            name: 'A',
            fields: [
              { key: 'x', type: 'strng' } /* 2 */,
              { key: 's', type: 'select', config: {} } /* 3 */,
            ],
            lookups: [{ keyBy: ['y'] }] /* 4 */,
          },
          { key: 'a', name: 'Again', fields: [{ key: 'z', type: 'text', access: { write: [] } }] }, // 5, 6
        ],
        operations: [{ key: 'op', endpoint: 'https://x.example/op' }],
        hooks: [{ key: 'h', event: 'RECORD_GONE', operationKey: 'op' }], // 7
        schedules: [{ operationKey: 'op', cron: 'every day', timezone: 'Nowhere/City' }], // 8, 9
        relyingParties: [
          {
            clientId: 'web',
            name: 'Web',
            redirectUris: ['https://w.example/cb'],
            allowedOrigins: ['https://*.w.example'],
          },
        ], // 10
      }),
    });
    const r = await push(p.ownerKey, dir);
    expect(r.code).not.toBe(0);
    expect(r.json.errors).toHaveLength(10);
    for (const e of r.json.errors) expect(e.message.length).toBeGreaterThan(5);
    expect(r.json.errors.map((e: { path: string }) => e.path)).toContain('models[0].fields[1].config.optionModelKey');
    expect(r.json.applied).toEqual({});
    expect(await count('models', p.projectId)).toBe(0);
    expect(await count('operations', p.projectId)).toBe(0);
    expect(await count('project_configs', p.projectId)).toBe(0);
  });

  test('pushing to a project of another tenant is refused: the project looks absent (404)', async () => {
    const a = await bootstrapProject(server, 'ta');
    const b = await bootstrapProject(server, 'tb');
    const r = await push(a.ownerKey, folder({ 'svc.config.json': minimal(b) }));
    expect(r.code).toBe(1);
    expect(r.err).toContain('404 NOT_FOUND: Project not found');
  });

  test('a config pinned to another project is refused', async () => {
    const a = await bootstrapProject(server, 'pin');
    const other = await cli(server, a.ownerKey, 'projects', 'create', '--name', 'other', '--json');
    const r = await push(a.ownerKey, folder({ 'svc.config.json': minimal(a) }), '--project', other.json.projectId);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`pinned to project ${a.projectId}`);
  });

  test('viewers cannot push', async () => {
    const p = await bootstrapProject(server, 'viewer');
    const r = await push(await memberKey(server, p, 'viewer'), folder({ 'svc.config.json': minimal(p) }));
    expect(r.code).toBe(1);
    expect(r.err).toContain('403');
  });

  test('omitted settings leave settings untouched; given settings get the spec defaults', async () => {
    const p = await bootstrapProject(server, 'settings');
    await push(
      p.ownerKey,
      folder({
        'svc.config.json': minimal(p, {
          project: { id: p.projectId, tenantId: p.tenantId, settings: { displayName: 'Shop' } },
        }),
      }),
    );
    const [row] = await server.svc.sql`select settings from projects where id = ${p.projectId}`;
    expect(row!.settings).toEqual({
      displayName: 'Shop',
      customerWelcomeEmailEnabled: true,
      customerSignupEnabled: true,
      customerPasswordEnabled: true,
      customerOtpEnabled: false,
    });
    await push(p.ownerKey, folder({ 'svc.config.json': minimal(p) }));
    const [again] = await server.svc.sql`select settings from projects where id = ${p.projectId}`;
    expect(again!.settings.displayName).toBe('Shop');
  });

  test('operationBaseUrl is prepended to relative endpoints', async () => {
    const p = await bootstrapProject(server, 'ops');
    await push(
      p.ownerKey,
      folder({
        'svc.config.json': minimal(p, {
          operationBaseUrl: 'https://fn.example/api/',
          operations: [
            { key: 'a', endpoint: '/run' },
            { key: 'b', endpoint: 'https://other.example/x' },
          ],
        }),
      }),
    );
    const rows = await server.svc.sql`select key, url from operations where project_id = ${p.projectId} order by key`;
    expect(rows.map((r) => r.url)).toEqual(['https://fn.example/api/run', 'https://other.example/x']);
  });

  test('model changes bump the schema version; an identical push does not; --force recreates', async () => {
    const p = await bootstrapProject(server, 'models');
    const dir = folder({
      'svc.config.json': minimal(p, { models: [{ key: 'page', name: 'Page', fields: [{ key: 't', type: 'text' }] }] }),
    });
    const version = async () =>
      (await server.svc.sql`select schema_version from projects where id = ${p.projectId}`)[0]!.schema_version;
    await push(p.ownerKey, dir);
    const v1 = await version();
    await push(p.ownerKey, dir);
    expect(await version()).toBe(v1);
    expect((await push(p.ownerKey, dir, '--force')).code).toBe(0);
    expect(await version()).toBe(v1 + 1);
  });

  test('apiKeys write ENVVAR=value into .env keeping other lines, and a second push creates no duplicate', async () => {
    const p = await bootstrapProject(server, 'keys');
    const dir = folder({
      'svc.config.json': minimal(p, {
        apiKeys: [
          { name: 'web', keyType: 'public', envVar: 'PUB', scopes: ['records:read'] },
          { name: 'srv', keyType: 'secret', envVar: 'SEC', scopes: ['records:write'], allowedFileTypes: ['image/*'] },
        ],
      }),
      '.env': '# mine\nOTHER=1\n',
    });
    const r = await push(p.ownerKey, dir);
    expect(r.code).toBe(0);
    expect(r.out).not.toMatch(/[ps]k_[0-9a-f]{48}/);
    const env = read(dir, '.env');
    expect(env).toContain('# mine\nOTHER=1\n');
    expect(env).toMatch(/^PUB=pk_[0-9a-f]{48}$/m);
    expect(env).toMatch(/^SEC=sk_[0-9a-f]{48}$/m);
    await push(p.ownerKey, dir);
    expect(read(dir, '.env')).toBe(env);
    const keys = await server.svc
      .sql`select name, allowed_file_types from api_keys where project_id = ${p.projectId} and deleted_at is null order by name`;
    expect(keys.map((k) => k.name)).toEqual(['srv', 'web']);
    expect(keys[0]!.allowed_file_types).toEqual(['image/*']);
  });

  test('customer roles are matched by key and absent ones are left untouched', async () => {
    const p = await bootstrapProject(server, 'roles');
    await cli(
      server,
      p.ownerKey,
      'customer-roles',
      'create',
      '--project',
      p.projectId,
      '--key',
      'legacy',
      '--name',
      'Legacy',
      '--permissions',
      'records:read',
    );
    const dir = folder({
      'svc.config.json': minimal(p, {
        customerRoles: [{ key: 'member', name: 'Member', permissions: ['records:read'] }],
      }),
    });
    await push(p.ownerKey, dir);
    writeFileSync(
      join(dir, 'svc.config.json'),
      JSON.stringify(
        minimal(p, { customerRoles: [{ key: 'member', name: 'Members', permissions: ['self:*'], isDefault: true }] }),
      ),
    );
    await push(p.ownerKey, dir);
    const list = await cli(server, p.ownerKey, 'customer-roles', 'list', '--dir', dir, '--json');
    expect(list.json.map((r: { key: string; name: string; disabled: boolean }) => [r.key, r.name, r.disabled])).toEqual(
      [
        ['legacy', 'Legacy', false],
        ['member', 'Members', false],
      ],
    );
    expect(await count('customer_roles', p.projectId)).toBe(2);
  });
});
