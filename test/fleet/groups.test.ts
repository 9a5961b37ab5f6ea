import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/eventually.ts';
import { folder } from '../config/support.ts';
import { tenantKeyArgs } from '../auth/support.ts';
import { apiKey, gql, PRODUCT, provision, publish, schemaFolder } from './support.ts';
import { targetOf } from '../../src/graphql/schema-entries.ts';

let a: TestServer;
let b: TestServer;
let t: { tenantId: string; projectId: string; ownerKey: string };
let prov: { id: string; key: string };
let reader: { id: string; key: string };

const WITH_PRICE = { ...PRODUCT, fields: [...PRODUCT.fields, { key: 'price', type: 'number' }] };

beforeAll(async () => {
  a = await startTestServer();
  b = await startTestServer({ DATABASE_URL: a.databaseUrl });
  t = await bootstrapProject(a, 'groups');
  prov = await apiKey(a, t.ownerKey, tenantKeyArgs('secret', t.projectId, 'provision,records:read,records:write'));
  reader = await apiKey(a, t.ownerKey, tenantKeyArgs('public', t.projectId, 'records:read'));
});
afterAll(async () => {
  await b.stop();
  await a.stop();
});

async function member(group: string, label: string): Promise<string> {
  const id = `${label}-${Math.random().toString(16).slice(2)}`;
  const r = await provision(a, {
    key: prov.key,
    projectId: t.projectId,
    body: { provision_id: id, group_id: group, name: label, allow_list_key_ids: [prov.id, reader.id] },
  });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body.project_id;
}

/** Reads until the key caches of `server` know the project (allow-list changes travel by NOTIFY). */
async function read(server: TestServer, projectId: string, query: string): Promise<any> {
  const end = Date.now() + 10_000;
  for (;;) {
    const r = await gql(server, { 'x-api-key': reader.key, 'x-project-id': projectId }, query);
    if (!JSON.stringify(r).includes('allow-list') || Date.now() > end) return r;
    await Bun.sleep(20);
  }
}

/** `svc fleet-groups publish --group <group> --dir <dir>` as `token` on process a: the CLI's result. */
const publishCli = (token: string, group: string, dir: string) =>
  cli(a, token, 'fleet-groups', 'publish', '--group', group, '--dir', dir);

describe('svc fleet-groups publish', () => {
  test('owners and tenant-wide admins publish; editors, viewers, project admins and the root token cannot', async () => {
    const added = async (role: string, project?: string) => {
      const args = ['members', 'add', '--email', `${role}${Math.random()}@x.test`, '--role', role, '--json'];
      if (project) args.push('--project', project);
      const r = await cli(a, t.ownerKey, ...args);
      return r.json.controlKey as string;
    };
    const admin = await added('admin');
    expect((await publish(a, admin, 'by-admin', [PRODUCT])).schemaVersion).toBe('1');
    for (const token of [await added('editor'), await added('viewer'), await added('admin', t.projectId)]) {
      const r = await publishCli(token, 'refused', schemaFolder([PRODUCT]));
      expect(r.code).toBe(1);
      expect(r.err).toContain(
        '403 PERMISSION_DENIED: Only owners and tenant-wide admins may publish fleet group schemas',
      );
    }
    const root = await publishCli(a.rootToken, 'refused', schemaFolder([PRODUCT]));
    expect(root.code).toBe(1);
    expect(root.err).toContain('403 PERMISSION_DENIED');
    expect(
      (await cli(a, t.ownerKey, 'fleet-groups', 'list', '--json')).json.groups.map(
        (g: { groupId: string }) => g.groupId,
      ),
    ).not.toContain('refused');
  });

  test('invalid models or group names are refused with the reason', async () => {
    const bad = await publishCli(
      t.ownerKey,
      'bad',
      schemaFolder([{ key: 'x', name: 'X', fields: [{ key: 'f', type: 'nope' }] }]),
    );
    expect(bad.code).toBe(1);
    expect(bad.err).toContain(
      '400 BAD_USER_INPUT: the models are not valid: models[0].fields[0].type: "nope" is not a field type',
    );
    const name = await publishCli(t.ownerKey, 'no spaces', schemaFolder([PRODUCT]));
    expect(name.code).toBe(1);
    expect(name.err).toContain('400 BAD_USER_INPUT: group must be');
    const missing = await cli(a, t.ownerKey, 'fleet-groups', 'publish', '--dir', schemaFolder([PRODUCT]));
    expect(missing.code).not.toBe(0);
  });

  test('a publish moves every member in one transaction; actors reload in both processes; an unchanged publish is no new version', async () => {
    expect(await publish(a, t.ownerKey, 'moving', [PRODUCT], 'Moving')).toEqual({
      groupId: 'moving',
      schemaVersion: '1',
      projects: 0,
    });
    const p1 = await member('moving', 'one');
    const p2 = await member('moving', 'two');
    // Live actors and cached responses in both processes, on version 1.
    for (const server of [a, b]) {
      const r = await read(server, p1, '{ products(first: 1) { totalCount } }');
      expect(r).toEqual({ data: { products: { totalCount: 0 } } });
      expect(
        (await read(server, p1, '{ products(first: 1) { edges { node { price } } } }')).errors[0].message,
      ).toContain('Cannot query field "price"');
    }
    const remote = await b.svc.projects.get(p2);
    expect(remote.snapshot.fleetSchemaVersion).toBe(1);
    expect(await publish(a, t.ownerKey, 'moving', [WITH_PRICE])).toEqual({
      groupId: 'moving',
      schemaVersion: '2',
      projects: 2,
    });
    const pinned = await a.svc.sql<
      { v: number }[]
    >`select fleet_schema_version as v from projects where id in ${a.svc.sql([p1, p2])}`;
    expect(pinned.map((r) => r.v)).toEqual([2, 2]);
    await eventually(() => remote.snapshot.fleetSchemaVersion === 2, 10_000);
    for (const server of [a, b]) {
      await eventually(() => server.svc.projects.peek(p1)?.current?.fleetSchemaVersion === 2, 10_000);
      expect(await read(server, p1, '{ products(first: 1) { edges { node { price } } } }')).toEqual({
        data: { products: { edges: [] } },
      });
    }
    expect(await publish(a, t.ownerKey, 'moving', [WITH_PRICE])).toEqual({
      groupId: 'moving',
      schemaVersion: '2',
      projects: 2,
    });
    const list = await cli(a, t.ownerKey, 'fleet-groups', 'list', '--json');
    expect(list.json.groups.find((g: { groupId: string }) => g.groupId === 'moving')).toEqual({
      groupId: 'moving',
      name: 'Moving',
      schemaVersion: '2',
      projects: 2,
    });
    // A new member joins at the current version.
    const p3 = await member('moving', 'three');
    expect((await a.svc.projects.get(p3)).snapshot.fleetSchemaVersion).toBe(2);
  });

  test('members with one schema version share one generated schema and compiled-query cache', async () => {
    await publish(a, t.ownerKey, 'shared', [PRODUCT]);
    const ids = [await member('shared', 's1'), await member('shared', 's2'), await member('shared', 's3')];
    const principal = (projectId: string) =>
      a.svc.gate.keys.principalOf(a.svc.gate.keys.peekValue(reader.key)!, projectId);
    await read(a, ids[0]!, '{ products(first: 2) { totalCount } }');
    await read(a, ids[2]!, '{ products(first: 2) { totalCount } }');
    const targets = await Promise.all(ids.map((id) => targetOf(a.svc, principal(id))));
    expect(targets[1]!.entry).toBe(targets[0]!.entry);
    expect(targets[2]!.entry.view.schema).toBe(targets[0]!.entry.view.schema);
    // Each keeps its own project: records and snapshots are per project.
    expect(new Set(targets.map((x) => x.snapshot.id)).size).toBe(3);
    // A project outside the group with the same models builds its own.
    const own = await bootstrapProject(a, 'standalone');
    const dir = folder({
      'svc.config.json': {
        key: 's',
        name: 'S',
        project: { id: own.projectId, tenantId: own.tenantId },
        models: [PRODUCT],
      },
    });
    expect((await cli(a, own.ownerKey, 'push', '--dir', dir)).code).toBe(0);
    const k = await apiKey(a, own.ownerKey, [
      '--type',
      'public',
      '--project',
      own.projectId,
      '--scopes',
      'records:read',
    ]);
    await gql(a, { 'x-api-key': k.key }, '{ products(first: 2) { totalCount } }');
    const alone = await targetOf(a.svc, a.svc.gate.keys.principalOf(a.svc.gate.keys.peekValue(k.key)!, null));
    expect(alone.entry.view.schema).not.toBe(targets[0]!.entry.view.schema);
  });
});

describe('member projects and svc push / pull', () => {
  test("push cannot change a member's models (the error names the group) but applies the rest; pull shows the group's models", async () => {
    await publish(a, t.ownerKey, 'pushy', [PRODUCT], 'Pushy shops');
    const pid = await member('pushy', 'pushed');
    const pin = { id: pid, tenantId: t.tenantId, settings: { displayName: 'Own name' } };
    const changed = folder({ 'svc.config.json': { key: 'm', name: 'M', project: pin, models: [WITH_PRICE] } });
    const r = await cli(a, t.ownerKey, 'push', '--dir', changed, '--json');
    expect(r.code).toBe(1);
    expect(r.json.errors).toEqual([
      {
        path: 'models',
        message: `project ${pid} is a member of fleet group "pushy" (Pushy shops): its models are the group's published schema (version 1) and cannot be changed by svc push; publish model changes with svc fleet-groups publish --group pushy`,
      },
    ]);
    // Settings still applied; the models did not change.
    const [row] = await a.svc.sql<
      { settings: Record<string, unknown> }[]
    >`select settings from projects where id = ${pid}`;
    expect(row!.settings.displayName).toBe('Own name');
    expect((await a.svc.sql`select 1 from models where project_id = ${pid}`).length).toBe(0);
    const atomic = await cli(a, t.ownerKey, 'push', '--atomic', '--dir', changed);
    expect(atomic.code).toBe(1);
    expect(atomic.err).toContain('409 CONFLICT: project');
    expect(atomic.err).toContain('fleet group "pushy"');
    // Pull writes the group's models; pushing them back is accepted.
    const pulled = await cli(a, t.ownerKey, 'pull', '--project', pid, '--dir', folder({}), '--json');
    expect(pulled.json.models).toEqual([PRODUCT]);
    const same = folder({ 'svc.config.json': { key: 'm', name: 'M', project: pin, models: pulled.json.models } });
    const ok = await cli(a, t.ownerKey, 'push', '--dir', same, '--json');
    expect(ok.code).toBe(0);
    expect(ok.json.errors).toEqual([]);
  });
});
