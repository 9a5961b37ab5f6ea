import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { hashSecret } from '../../src/ids.ts';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

describe('svc tenants create', () => {
  test('the root token creates a tenant with an owner and a control key shown once', async () => {
    const r = await cli(
      server,
      server.rootToken,
      'tenants',
      'create',
      '--name',
      'Acme',
      '--owner-email',
      'o@acme.test',
      '--json',
    );
    expect(r.code).toBe(0);
    expect(Object.keys(r.json).sort()).toEqual(['controlKey', 'memberId', 'tenantId']);
    expect(r.json.controlKey).toMatch(/^ck_[0-9a-f]{64}$/);
  });

  test('control keys are stored only as hashes', async () => {
    const r = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'Hashco', '--json');
    const rows = await server.svc.sql`select key_hash from control_keys`;
    const stored = rows.map((x) => x.key_hash as string);
    expect(stored).toContain(hashSecret(r.json.controlKey));
    const dump = JSON.stringify(await server.svc.sql`select * from control_keys`);
    expect(dump).not.toContain(r.json.controlKey);
    expect(dump).not.toContain(server.rootToken);
  });

  test('a control key cannot create tenants', async () => {
    const t = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'A2', '--json');
    const r = await cli(server, t.json.controlKey, 'tenants', 'create', '--name', 'nope');
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('403');
    expect(r.err.trim().split('\n')).toHaveLength(1);
  });

  test('a wrong or missing token exits non-zero with one line naming 401', async () => {
    for (const token of ['rt_wrong', undefined]) {
      const r = await cli(server, token, 'tenants', 'create', '--name', 'x');
      expect(r.code).toBe(1);
      expect(r.err).toContain('401');
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
  });

  test('an empty name or one over 200 characters is refused with a clear error', async () => {
    for (const name of ['', 'x'.repeat(201)]) {
      const r = await cli(server, server.rootToken, 'tenants', 'create', '--name', name);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/400 BAD_USER_INPUT: name (is required|must be at most 200 characters)/);
    }
  });
});

describe('a missing required flag', () => {
  test('is named as typed, with the usage, before any request (exit 2)', async () => {
    const cases: [string[], string][] = [
      [['tenants', 'create'], '--name is required'],
      [['projects', 'create'], '--name is required'],
      [['members', 'add', '--role', 'editor'], '--email is required'],
      [['members', 'add'], '--email and --role are required'],
      [['api-keys', 'create', '--type', 'public'], '--name is required'],
    ];
    for (const [argv, message] of cases) {
      const r = await cli(server, server.rootToken, ...argv);
      expect(r.code).toBe(2);
      expect(r.err.split('\n')[0]).toBe(`svc: ${message}`);
      expect(r.err).toContain('usage: svc ');
    }
  });

  test('svc members add --help describes members of every role, not only admins', async () => {
    const r = await cli(server, undefined, 'members', 'add', '--help');
    expect(r.out).toContain('owner, admin, editor or viewer');
    expect(r.out).not.toContain('admin member');
  });
});

describe('svc projects create and members add', () => {
  test('an owner creates projects and adds members of each role', async () => {
    const t = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'P', '--json');
    const p = await cli(server, t.json.controlKey, 'projects', 'create', '--name', 'Site', '--json');
    expect(p.code).toBe(0);
    expect(p.json).toEqual({ projectId: expect.stringMatching(/^prj_/), tenantId: t.json.tenantId });
    for (const role of ['admin', 'editor', 'viewer']) {
      const m = await cli(
        server,
        t.json.controlKey,
        'members',
        'add',
        '--email',
        `${role}@p.test`,
        '--role',
        role,
        '--project',
        p.json.projectId,
        '--json',
      );
      expect(m.code).toBe(0);
      expect(m.json.controlKey).toMatch(/^ck_/);
    }
  });

  test('an editor may neither add members nor create projects', async () => {
    const t = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'E', '--json');
    const p = await cli(server, t.json.controlKey, 'projects', 'create', '--name', 'Site', '--json');
    const ed = await cli(
      server,
      t.json.controlKey,
      'members',
      'add',
      '--email',
      'ed@e.test',
      '--role',
      'editor',
      '--project',
      p.json.projectId,
      '--json',
    );
    expect(
      (
        await cli(
          server,
          ed.json.controlKey,
          'members',
          'add',
          '--email',
          'x@e.test',
          '--role',
          'viewer',
          '--project',
          p.json.projectId,
        )
      ).err,
    ).toContain('403');
    expect((await cli(server, ed.json.controlKey, 'projects', 'create', '--name', 'n')).err).toContain('403');
  });

  test('a member cannot add members to a project of another tenant', async () => {
    const a = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'TA', '--json');
    const b = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'TB', '--json');
    const pb = await cli(server, b.json.controlKey, 'projects', 'create', '--name', 'B site', '--json');
    const r = await cli(
      server,
      a.json.controlKey,
      'members',
      'add',
      '--email',
      'x@a.test',
      '--role',
      'viewer',
      '--project',
      pb.json.projectId,
    );
    expect(r.code).toBe(1);
    expect(r.err).toContain('404 NOT_FOUND: Project not found');
  });

  test('an unknown role or a bad email is refused', async () => {
    const t = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'R', '--json');
    expect(
      (await cli(server, t.json.controlKey, 'members', 'add', '--email', 'x@r.test', '--role', 'god')).err,
    ).toContain('role must be one of');
    expect(
      (await cli(server, t.json.controlKey, 'members', 'add', '--email', 'nope', '--role', 'viewer')).err,
    ).toContain('email');
  });
});

describe('usage errors', () => {
  test('an unknown command prints usage and exits 2', async () => {
    const r = await cli(server, undefined, 'frobnicate');
    expect(r.code).toBe(2);
    expect(r.err).toContain('usage: svc');
  });

  test('an unknown flag prints the command usage and exits 2', async () => {
    const r = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'x', '--colour', 'red');
    expect(r.code).toBe(2);
    expect(r.err).toContain('unknown flag --colour');
  });

  test('an unreachable server is one clear line', async () => {
    const r = await cli({ apiUrl: 'http://127.0.0.1:1' }, 'x', 'tenants', 'create', '--name', 'x');
    expect(r.code).toBe(1);
    expect(r.err).toContain('cannot reach svc');
  });
});
