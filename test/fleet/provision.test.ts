import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { tenantKeyArgs } from '../auth/support.ts';
import { apiKey, gql, PRODUCT, provision, provisionStatus, publish } from './support.ts';
import { PROVISION_STEPS } from '../../src/fleet/protocol.ts';

let a: TestServer;
let b: TestServer;
let t: { tenantId: string; projectId: string; ownerKey: string };
let u: { tenantId: string; projectId: string; ownerKey: string };
/** sk_t_ with provision, on t's first project; the key the tests provision with. */
let prov: { id: string; key: string };
/** pk_t_ read key of tenant t, extended to each provisioned project. */
let reader: { id: string; key: string };

beforeAll(async () => {
  a = await startTestServer();
  // A second process on the same database (CONTRACT §2).
  b = await startTestServer({ DATABASE_URL: a.databaseUrl });
  t = await bootstrapProject(a, 'fleet-owner');
  u = await bootstrapProject(a, 'other-tenant');
  await publish(a, t.ownerKey, 'shops', [PRODUCT], 'Shops');
  await publish(a, u.ownerKey, 'u-only', [PRODUCT]);
  prov = await apiKey(
    a,
    t.ownerKey,
    tenantKeyArgs('secret', t.projectId, 'provision,records:read,records:write,records:publish'),
  );
  reader = await apiKey(a, t.ownerKey, tenantKeyArgs('public', t.projectId, 'records:read'));
});
afterAll(async () => {
  await b.stop();
  await a.stop();
});

let n = 0;
const nextId = (label: string) => `${label}-${++n}-${Math.random().toString(16).slice(2, 8)}`;
const body = (id: string, extra: Record<string, unknown> = {}) => ({
  provision_id: id,
  group_id: 'shops',
  name: `Shop ${id}`,
  allow_list_key_ids: [prov.id, reader.id],
  ...extra,
});
const projectsNamed = async (name: string) =>
  (await a.svc.sql<{ id: string }[]>`select id from projects where name = ${name}`).map((r) => r.id);
const projectCount = async (tenantId: string) =>
  Number((await a.svc.sql<{ n: string }[]>`select count(*) as n from projects where tenant_id = ${tenantId}`)[0]!.n);
async function allowListCount(keyId: string, projectId: string): Promise<number> {
  const [row] = await a.svc.sql<{ ids: string[] }[]>`select project_ids as ids from api_keys where id = ${keyId}`;
  return row!.ids.filter((p) => p === projectId).length;
}

describe('POST /v1/provision', () => {
  test("creates a project in the key's tenant, joined to the group, branded, served by the listed tenant keys", async () => {
    const id = nextId('first');
    const r = await provision(a, {
      key: prov.key,
      projectId: t.projectId,
      body: body(id, { branding: { displayName: 'Acme Shop', primaryColor: '#0055ff' }, tenant_id: u.tenantId }),
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      provision_id: id,
      project_id: expect.stringMatching(/^prj_/),
      status: 'completed',
      schema_version: '1',
      steps: { created_project: true, group_joined: true, branding_set: true, allow_list_extended: true },
    });
    const pid = r.body.project_id as string;
    // The tenant comes from the key, never from the body.
    const [row] = await a.svc.sql<
      { tenant_id: string; settings: Record<string, unknown> }[]
    >`select tenant_id, settings from projects where id = ${pid}`;
    expect(row!.tenant_id).toBe(t.tenantId);
    expect(row!.settings).toMatchObject({ displayName: 'Acme Shop', primaryColor: '#0055ff' });
    // No per-project keys: the tenant keys serve the new project through X-Project-Id.
    expect((await a.svc.sql`select id from api_keys where project_id = ${pid}`).length).toBe(0);
    const created = await gql(
      a,
      { 'x-api-key': prov.key, 'x-project-id': pid },
      'mutation { createProduct(data: { title: "Mug", sku: "m-1" }) { _id } }',
    );
    expect(created.errors).toBeUndefined();
    const read = await gql(
      a,
      { 'x-api-key': reader.key, 'x-project-id': pid },
      '{ product(sku: "m-1") { title } products(first: 5) { totalCount } }',
    );
    expect(read).toEqual({ data: { product: { title: 'Mug' }, products: { totalCount: 1 } } });
    // Records stay isolated per project: the caller's own project does not see it.
    const home = await gql(
      a,
      { 'x-api-key': reader.key, 'x-project-id': t.projectId },
      '{ records(modelKey: "product") { totalCount } }',
    );
    expect(home.data.records.totalCount).toBe(0);
  });

  test('a re-send returns the existing result; GET reports it; the same id with another body is CONFLICT', async () => {
    const id = nextId('again');
    const first = await provision(a, { key: prov.key, projectId: t.projectId, body: body(id) });
    expect(first.status).toBe(201);
    const again = await provision(a, { key: prov.key, projectId: t.projectId, body: body(id) });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const got = await provisionStatus(a, prov.key, t.projectId, id);
    expect(got).toEqual({ status: 200, body: first.body });
    const other = await provision(a, {
      key: prov.key,
      projectId: t.projectId,
      body: body(id, { name: 'Another name' }),
    });
    expect(other.status).toBe(409);
    expect(other.body).toEqual({
      error: 'CONFLICT',
      message: `provision_id "${id}" was already used with a different request body`,
    });
    expect(await projectsNamed(`Shop ${id}`)).toHaveLength(1);
    // Ids are any printable string: percent-encoded in the GET path.
    const odd = `${nextId('odd')} 100% / ü?#`;
    const made = await provision(a, { key: prov.key, projectId: t.projectId, body: body(odd) });
    expect(made.status).toBe(201);
    expect(await provisionStatus(a, prov.key, t.projectId, odd)).toEqual({ status: 200, body: made.body });
    const unknown = await provisionStatus(a, prov.key, t.projectId, 'never-sent');
    expect(unknown).toEqual({ status: 404, body: { error: 'NOT_FOUND', message: 'Provision not found' } });
  });

  test('refusals: wrong credentials, browsers, missing scope, X-Project-Id, unknown or foreign group and keys', async () => {
    const pk = await apiKey(a, t.ownerKey, ['--type', 'public', '--project', t.projectId, '--scopes', 'records:read']);
    const sk = await apiKey(a, t.ownerKey, ['--type', 'secret', '--project', t.projectId, '--scopes', 'records:read']);
    const noScope = await apiKey(a, t.ownerKey, tenantKeyArgs('secret', t.projectId, 'records:read'));
    const foreignKey = await apiKey(a, u.ownerKey, tenantKeyArgs('public', u.projectId, 'records:read'));
    const before = await projectCount(t.tenantId);
    const needsSkT = {
      error: 'PERMISSION_DENIED',
      message: 'Provisioning needs a secret tenant key (sk_t_) holding the provision scope',
    };
    const noControl = {
      error: 'PERMISSION_DENIED',
      message:
        'Provisioning takes a secret tenant API key (sk_t_) in x-api-key; control keys and the root token cannot provision',
    };
    const cases: [string, Parameters<typeof provision>[1], number, unknown][] = [
      ['publishable tenant key', { key: reader.key, projectId: t.projectId }, 403, needsSkT],
      ['publishable project key', { key: pk.key }, 403, needsSkT],
      ['secret project-bound key', { key: sk.key, projectId: t.projectId }, 403, needsSkT],
      ['control key', { headers: { authorization: `Bearer ${t.ownerKey}` } }, 403, noControl],
      ['control key as x-api-key', { key: t.ownerKey, projectId: t.projectId }, 403, noControl],
      [
        'browser',
        { key: prov.key, projectId: t.projectId, headers: { origin: 'https://shop.example' } },
        403,
        {
          error: 'PERMISSION_DENIED',
          message: 'Provisioning is server-side only: requests from a browser are refused',
        },
      ],
      [
        'browser fetch metadata',
        { key: prov.key, projectId: t.projectId, headers: { 'sec-fetch-site': 'cross-site' } },
        403,
        {
          error: 'PERMISSION_DENIED',
          message: 'Provisioning is server-side only: requests from a browser are refused',
        },
      ],
      [
        'sk_t_ without provision',
        { key: noScope.key, projectId: t.projectId },
        403,
        { error: 'PERMISSION_DENIED', message: 'missing required scope: provision' },
      ],
      [
        'missing X-Project-Id',
        { key: prov.key },
        400,
        { error: 'BAD_USER_INPUT', message: 'X-Project-Id is required for a tenant API key' },
      ],
      [
        'foreign X-Project-Id',
        { key: prov.key, projectId: u.projectId },
        403,
        { error: 'PERMISSION_DENIED', message: "X-Project-Id is not on the key's project allow-list" },
      ],
      ['no key at all', {}, 401, { error: 'UNAUTHENTICATED', message: 'Authentication required' }],
    ];
    for (const [label, call, status, expected] of cases) {
      const r = await provision(a, { ...call, body: body(nextId(label)) });
      expect({ label, status: r.status, body: r.body }).toEqual({ label, status, body: expected });
    }
    // Body problems, after a valid key.
    const ok = { key: prov.key, projectId: t.projectId };
    const unknownGroup = await provision(a, { ...ok, body: body(nextId('g'), { group_id: 'no-such-group' }) });
    expect(unknownGroup).toEqual({
      status: 404,
      body: { error: 'NOT_FOUND', message: 'Fleet group not found: no-such-group' },
    });
    // Another tenant's group answers exactly like a group that does not exist.
    const foreignGroup = await provision(a, { ...ok, body: body(nextId('g'), { group_id: 'u-only' }) });
    expect(foreignGroup).toEqual({
      status: 404,
      body: { error: 'NOT_FOUND', message: 'Fleet group not found: u-only' },
    });
    const foreignAllow = await provision(a, {
      ...ok,
      body: body(nextId('k'), { allow_list_key_ids: [foreignKey.id] }),
    });
    expect(foreignAllow).toEqual({
      status: 404,
      body: { error: 'NOT_FOUND', message: `API key not found: ${foreignKey.id}` },
    });
    const boundAllow = await provision(a, { ...ok, body: body(nextId('k'), { allow_list_key_ids: [pk.id] }) });
    expect(boundAllow.status).toBe(400);
    expect(boundAllow.body.error).toBe('BAD_USER_INPUT');
    for (const [bad, message] of [
      [{ group_id: 'shops', name: 'x' }, 'provision_id is required (a non-empty string)'],
      [{ provision_id: 'p', name: 'x' }, 'group_id is required (a non-empty string)'],
      [{ provision_id: 'p', group_id: 'shops' }, 'name is required (a non-empty string)'],
      [
        { provision_id: 'p', group_id: 'shops', name: 'x', branding: { font: 'Comic' } },
        'branding.font is not a branding field; use displayName, logoUrl, primaryColor, fromName, supportEmail, replyTo, appBaseUrl',
      ],
      [
        { provision_id: 'p', group_id: 'shops', name: 'x', branding: { primaryColor: 'blue' } },
        'branding.primaryColor must be a hex colour like #0055ff',
      ],
      [
        { provision_id: 'p', group_id: 'shops', name: 'x', allow_list_key_ids: 'key_1' },
        'allow_list_key_ids must be an array of API key ids',
      ],
    ] as const) {
      const r = await provision(a, { ...ok, body: bad });
      expect(r).toEqual({ status: 400, body: { error: 'BAD_USER_INPUT', message } });
    }
    const notJson = await fetch(`${a.apiUrl}/v1/provision`, {
      method: 'POST',
      headers: { 'x-api-key': prov.key, 'x-project-id': t.projectId, 'content-type': 'application/json' },
      body: '{',
    });
    expect(notJson.status).toBe(400);
    // Nothing was created by any refusal.
    expect(await projectCount(t.tenantId)).toBe(before);
    // GET takes the same credentials.
    const get = await fetch(`${a.apiUrl}/v1/provision/x`, {
      headers: { 'x-api-key': reader.key, 'x-project-id': t.projectId },
    });
    expect(get.status).toBe(403);
  });
});

describe('fault tolerance', () => {
  for (const [i, step] of PROVISION_STEPS.entries()) {
    test(`a failure right after ${step} is resumed by a re-send: one project, no duplicate allow-list entry`, async () => {
      const id = nextId(`fault-${step}`);
      a.svc.provisioning.faults.failAfter = step;
      const failed = await provision(a, {
        key: prov.key,
        projectId: t.projectId,
        body: body(id, { branding: { displayName: 'Faulty' } }),
      });
      expect(failed.status).toBe(500);
      expect(failed.body.error).toBe('INTERNAL_SERVER_ERROR');
      expect(JSON.stringify(failed.body)).not.toContain('injected');
      const midway = await provisionStatus(a, prov.key, t.projectId, id);
      expect(midway.body.status).toBe(i === PROVISION_STEPS.length - 1 ? 'completed' : 'failed');
      expect(midway.body.steps).toEqual(Object.fromEntries(PROVISION_STEPS.map((s, j) => [s, j <= i])));
      // The re-send goes to the other process: the record, not memory, carries the state.
      const resumed = await provision(b, {
        key: prov.key,
        projectId: t.projectId,
        body: body(id, { branding: { displayName: 'Faulty' } }),
      });
      expect(resumed.status).toBe(200);
      expect(resumed.body.status).toBe('completed');
      expect(resumed.body.project_id).toBe(midway.body.project_id);
      expect(Object.values(resumed.body.steps)).toEqual([true, true, true, true]);
      expect(await projectsNamed(`Shop ${id}`)).toEqual([resumed.body.project_id]);
      expect(await allowListCount(prov.id, resumed.body.project_id)).toBe(1);
      expect(await allowListCount(reader.id, resumed.body.project_id)).toBe(1);
      // The key caches of both processes learn about the extension (within a NOTIFY round trip).
      for (const server of [a, b]) {
        let r: unknown;
        const end = Date.now() + 10_000;
        do
          r = await gql(
            server,
            { 'x-api-key': reader.key, 'x-project-id': resumed.body.project_id },
            '{ products(first: 1) { totalCount } }',
          );
        while (JSON.stringify(r).includes('allow-list') && Date.now() < end && (await Bun.sleep(20), true));
        expect(r).toEqual({ data: { products: { totalCount: 0 } } });
      }
    });
  }
});

describe('concurrency', () => {
  test('1,000 concurrent requests with one provision_id produce one project', async () => {
    const id = nextId('dup');
    const answers = await Promise.all(
      Array.from({ length: 1000 }, () => provision(a, { key: prov.key, projectId: t.projectId, body: body(id) })),
    );
    expect(answers.filter((r) => r.status === 201)).toHaveLength(1);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(999);
    const ids = new Set(answers.map((r) => r.body.project_id));
    expect(ids.size).toBe(1);
    expect(answers.every((r) => r.body.status === 'completed')).toBe(true);
    expect(await projectsNamed(`Shop ${id}`)).toEqual([...ids]);
    expect(await allowListCount(prov.id, [...ids][0])).toBe(1);
  }, 120_000);

  test('many different provisions at once, listing the same keys, racing a publish: all complete, none left behind', async () => {
    await publish(a, t.ownerKey, 'racing', [PRODUCT]);
    const ids = Array.from({ length: 24 }, () => nextId('many'));
    const [answers] = await Promise.all([
      Promise.all(
        ids.map((id, i) =>
          provision(i % 2 ? a : b, { key: prov.key, projectId: t.projectId, body: body(id, { group_id: 'racing' }) }),
        ),
      ),
      (async () => {
        await Bun.sleep(20);
        await publish(a, t.ownerKey, 'racing', [
          { ...PRODUCT, fields: [...PRODUCT.fields, { key: 'price', type: 'number' }] },
        ]);
      })(),
    ]);
    expect(answers.map((r) => r.status)).toEqual(ids.map(() => 201));
    const projects = answers.map((r) => r.body.project_id as string);
    for (const pid of projects) {
      expect(await allowListCount(prov.id, pid)).toBe(1);
      expect(await allowListCount(reader.id, pid)).toBe(1);
    }
    // Whichever committed first, every member ends on the group's current version.
    const pinned = await a.svc.sql<
      { v: number }[]
    >`select fleet_schema_version as v from projects where id in ${a.svc.sql(projects)}`;
    expect(new Set(pinned.map((r) => r.v))).toEqual(new Set([2]));
  }, 120_000);

  test('duplicates split over two processes produce one project', async () => {
    const id = nextId('two-procs');
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        provision(i % 2 ? a : b, { key: prov.key, projectId: t.projectId, body: body(id) }),
      ),
    );
    expect(answers.every((r) => r.status === 200 || r.status === 201)).toBe(true);
    expect(answers.filter((r) => r.status === 201).length).toBeGreaterThanOrEqual(1);
    const ids = new Set(answers.map((r) => r.body.project_id));
    expect(ids.size).toBe(1);
    expect(await projectsNamed(`Shop ${id}`)).toEqual([...ids]);
    expect(await allowListCount(reader.id, [...ids][0])).toBe(1);
  }, 120_000);
});

describe('CLI', () => {
  test('fleet-groups list shows the group with its members', async () => {
    const r = await cli(a, t.ownerKey, 'fleet-groups', 'list', '--json');
    expect(r.code).toBe(0);
    const shops = r.json.groups.find((g: { groupId: string }) => g.groupId === 'shops');
    expect(shops).toMatchObject({ groupId: 'shops', name: 'Shops', schemaVersion: '1' });
    const [row] = await a.svc.sql<
      { n: number }[]
    >`select count(*)::int as n from projects p join fleet_groups g on g.id = p.fleet_group_id where g.tenant_id = ${t.tenantId} and g.key = 'shops'`;
    expect(shops.projects).toBe(row!.n);
    // Another tenant's groups are not listed.
    expect(r.json.groups.map((g: { groupId: string }) => g.groupId)).not.toContain('u-only');
  });
});
