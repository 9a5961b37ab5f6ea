import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect as tcpConnect } from 'node:net';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { hashSecret } from '../../src/ids.ts';
import {
  addMember,
  cliCreateKey,
  createKey,
  setup,
  tenantKeyArgs,
  tryCreateKey,
  whoami,
  type Setup,
} from './support.ts';

let server: TestServer;
let s: Setup;
beforeAll(async () => {
  server = await startTestServer();
  s = await setup(server);
});
afterAll(() => server.stop());

const AUTH = { error: 'UNAUTHENTICATED', message: 'Authentication required' };
const DENIED = { error: 'PERMISSION_DENIED', message: 'Insufficient permissions' };
/** CLI arguments of a project-bound key of `type` (records:read unless scopes are given). */
const bound =
  (type: 'public' | 'secret') =>
  (...scopes: string[]) => [
    '--type',
    type,
    '--scopes',
    (scopes.length ? scopes : ['records:read']).join(','),
    '--project',
    s.projectId,
  ];
const pub = bound('public');
const sec = bound('secret');

/** A second project of the same tenant, for allow-list tests. */
async function secondProject(name: string): Promise<string> {
  const p = await cli(server, s.ownerKey, 'projects', 'create', '--name', name, '--json');
  return p.json.projectId;
}

describe('API keys table', () => {
  test('pk_: public, project-bound, read-only; drafts:read is rejected at creation', async () => {
    const k = await createKey(server, s.ownerKey, ...pub());
    expect(k.key).toMatch(/^pk_[0-9a-f]{48}$/);
    const r = await whoami(server, { 'x-api-key': k.key, origin: 'https://shop.example' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      keyId: k.id,
      kind: 'pk',
      projectId: s.projectId,
      tenantId: s.tenantId,
      scopes: ['records:read'],
    });
    const bad = await tryCreateKey(server, s.ownerKey, ...pub('records:read', 'drafts:read'));
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('400 BAD_USER_INPUT: scope "drafts:read" cannot be granted to a public key');
  });

  test('sk_: secret, project-bound, may hold drafts:read; Origin or Sec-Fetch-Site is rejected', async () => {
    const k = await createKey(server, s.ownerKey, ...sec('records:read', 'records:write', 'drafts:read'));
    expect(k.key).toMatch(/^sk_[0-9a-f]{48}$/);
    expect((await whoami(server, { 'x-api-key': k.key })).body.scopes).toEqual([
      'drafts:read',
      'records:read',
      'records:write',
    ]);
    for (const h of [
      { origin: 'https://shop.example' },
      { 'sec-fetch-site': 'same-origin' },
      { 'sec-fetch-site': 'none' },
    ] as Record<string, string>[]) {
      const r = await whoami(server, { 'x-api-key': k.key, ...h });
      expect(r.status).toBe(403);
      expect(r.body).toEqual(DENIED);
    }
  });

  test('pk_t_: public, tenant-scoped, browser-safe, limited to the public read-only subset', async () => {
    const k = await createKey(server, s.ownerKey, ...tenantKeyArgs('public', s.projectId, 'records:read'));
    expect(k.key).toMatch(/^pk_t_[0-9a-f]{48}$/);
    const r = await whoami(server, { 'x-api-key': k.key, 'x-project-id': s.projectId, origin: 'https://shop.example' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ kind: 'pk_t', projectId: s.projectId });
    const bad = await tryCreateKey(server, s.ownerKey, ...tenantKeyArgs('public', s.projectId, 'records:write'));
    expect(bad.err).toContain('scope "records:write" cannot be granted to a public key');
  });

  test('sk_t_: secret, tenant-scoped, rejected from a browser, may hold provision', async () => {
    const k = await createKey(server, s.ownerKey, ...tenantKeyArgs('secret', s.projectId, 'provision,records:read'));
    expect(k.key).toMatch(/^sk_t_[0-9a-f]{48}$/);
    expect((await whoami(server, { 'x-api-key': k.key, 'x-project-id': s.projectId })).status).toBe(200);
    const r = await whoami(server, { 'x-api-key': k.key, 'x-project-id': s.projectId, origin: 'https://x.example' });
    expect(r.status).toBe(403);
    expect(r.body).toEqual(DENIED);
    const bad = await tryCreateKey(server, s.ownerKey, ...sec('provision'));
    expect(bad.err).toContain('scope "provision" can only be granted to a secret tenant key (sk_t_)');
  });

  test('keys are prefix plus hex and only their SHA-256 is stored', async () => {
    const k = await createKey(server, s.ownerKey, ...sec());
    const [row] = await server.svc.sql`select key_hash, key_hint from api_keys where id = ${k.id}`;
    expect(row!.key_hash).toBe(hashSecret(k.key));
    expect(k.key.startsWith(row!.key_hint)).toBe(true);
    expect(JSON.stringify(await server.svc.sql`select * from api_keys`)).not.toContain(k.key);
  });

  test('the key lookup is an index probe, not a scan', async () => {
    const [plan] = await server.svc.sql.unsafe(`explain (format json) select * from api_keys where key_hash = 'x'`);
    expect(JSON.stringify(plan)).not.toContain('Seq Scan');
  });
});

describe('API keys rules', () => {
  test('rule 1: every API request requires a key in x-api-key', async () => {
    const r = await whoami(server, {});
    expect(r.status).toBe(401);
    expect(r.body).toEqual(AUTH);
  });

  test('rule 2: a project-bound key serves exactly one project and ignores X-Project-Id', async () => {
    const other = await secondProject('other-for-rule-2');
    const k = await createKey(server, s.ownerKey, ...pub());
    for (const header of [other, 'prj_nope', '', 'x'.repeat(10_000)]) {
      const r = await whoami(server, { 'x-api-key': k.key, 'x-project-id': header });
      expect(r.status).toBe(200);
      expect(r.body.projectId).toBe(s.projectId);
    }
  });

  test('rule 3: a tenant key needs X-Project-Id on its allow-list (400 missing, 403 not listed)', async () => {
    const listed = await secondProject('listed');
    const unlisted = await secondProject('unlisted');
    const k = await createKey(
      server,
      s.ownerKey,
      ...tenantKeyArgs('secret', `${s.projectId},${listed}`, 'records:read'),
    );
    expect((await whoami(server, { 'x-api-key': k.key, 'x-project-id': listed })).body.projectId).toBe(listed);
    const missing = await whoami(server, { 'x-api-key': k.key });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe('X-Project-Id is required for a tenant API key');
    for (const p of [unlisted, 'prj_nope', 'x'.repeat(10_000)]) {
      const r = await whoami(server, { 'x-api-key': k.key, 'x-project-id': p });
      expect(r.status).toBe(403);
      expect(r.body.message).toBe("X-Project-Id is not on the key's project allow-list");
    }
  });

  test('rule 3: the allow-list is fixed at creation and always within the key’s own tenant', async () => {
    const t2 = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'elsewhere', '--json');
    const foreign = (await cli(server, t2.json.controlKey, 'projects', 'create', '--name', 'foreign', '--json')).json
      .projectId;
    const bad = await tryCreateKey(
      server,
      s.ownerKey,
      ...tenantKeyArgs('secret', `${s.projectId},${foreign}`, 'records:read'),
    );
    expect(bad.code).toBe(1);
    expect(bad.err).toContain(`projects: ${foreign} not found in this tenant`);
    const k = await createKey(server, s.ownerKey, ...tenantKeyArgs('secret', s.projectId, 'records:read'));
    const patch = await fetch(`${server.apiUrl}/v1/control/api-keys/${k.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${s.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ projects: [foreign] }),
    });
    expect(patch.status).toBe(400);
    expect(((await patch.json()) as { message: string }).message).toContain('fixed at creation');
  });

  test('rule 4: tenant keys take the same scopes as their project-bound siblings; pk_t_ only the public subset', async () => {
    const k = await createKey(
      server,
      s.ownerKey,
      ...tenantKeyArgs('secret', s.projectId, 'records:write,drafts:read,secrets:read.project'),
    );
    expect(k.key).toMatch(/^sk_t_/);
    const bad = await tryCreateKey(server, s.ownerKey, ...tenantKeyArgs('public', s.projectId, 'secrets:read.project'));
    expect(bad.err).toContain('cannot be granted to a public key');
  });

  test('rule 5: a public key cannot get a scope that would subsume a secret-only capability', async () => {
    for (const scope of ['secrets:*', 'auth:login_with_svc', '*', 'files:list.all', 'records:*']) {
      const bad = await tryCreateKey(server, s.ownerKey, ...pub(scope));
      expect(bad.code).toBe(1);
      expect(bad.err).toContain(`scope "${scope}" cannot be granted to a public key`);
    }
  });

  test('rule 6: a domain-restricted public key is refused from other origins with PERMISSION_DENIED', async () => {
    const k = await createKey(
      server,
      s.ownerKey,
      ...pub(),
      '--origins',
      'https://shop.example,https://*.brand.example',
    );
    for (const origin of ['https://shop.example', 'https://eu.brand.example']) {
      expect((await whoami(server, { 'x-api-key': k.key, origin })).status).toBe(200);
    }
    for (const h of [
      { origin: 'https://evil.example' },
      { origin: 'http://shop.example' },
      { origin: 'https://brand.example' },
      {},
    ] as Record<string, string>[]) {
      const r = await whoami(server, { 'x-api-key': k.key, ...h });
      expect(r.status).toBe(403);
      expect(r.body).toEqual(DENIED);
    }
    const secret = await tryCreateKey(server, s.ownerKey, ...sec(), '--origins', 'https://shop.example');
    expect(secret.err).toContain('origins apply to public keys only');
  });

  test('rule 6: rotation — new key with the same scopes, switch, verify, disable the old, delete it later', async () => {
    const old = await createKey(server, s.ownerKey, ...sec('records:read', 'records:write'));
    const fresh = await createKey(server, s.ownerKey, ...sec('records:read', 'records:write'));
    expect((await whoami(server, { 'x-api-key': fresh.key })).body.scopes).toEqual(
      (await whoami(server, { 'x-api-key': old.key })).body.scopes,
    );
    expect((await cli(server, s.ownerKey, 'api-keys', 'disable', old.id, '--json')).code).toBe(0);
    expect((await whoami(server, { 'x-api-key': old.key })).body).toEqual(AUTH);
    expect((await whoami(server, { 'x-api-key': fresh.key })).status).toBe(200);
    expect((await cli(server, s.ownerKey, 'api-keys', 'delete', old.id, '--json')).json).toEqual({
      id: old.id,
      deleted: true,
    });
    const list = await cli(server, s.ownerKey, 'api-keys', 'list', '--project', s.projectId, '--json');
    expect(list.json.keys.map((k: { id: string }) => k.id)).not.toContain(old.id);
    expect(list.json.keys.map((k: { id: string }) => k.id)).toContain(fresh.id);
  });
});

describe('Errors table', () => {
  test('missing, invalid, expired, disabled or deleted key: UNAUTHENTICATED Authentication required', async () => {
    const k = await createKey(server, s.ownerKey, ...pub());
    const expiring = await createKey(
      server,
      s.ownerKey,
      ...pub(),
      '--expires-at',
      new Date(Date.now() + 1500).toISOString(),
    );
    const disabled = await createKey(server, s.ownerKey, ...pub());
    const deleted = await createKey(server, s.ownerKey, ...pub());
    expect((await whoami(server, { 'x-api-key': expiring.key })).status).toBe(200);
    await cli(server, s.ownerKey, 'api-keys', 'disable', disabled.id);
    await cli(server, s.ownerKey, 'api-keys', 'delete', deleted.id);
    await Bun.sleep(1600);
    const invalid = 'pk_' + 'a'.repeat(48);
    for (const value of [
      undefined,
      invalid,
      expiring.key,
      disabled.key,
      deleted.key,
      k.key.slice(0, -1),
      k.key.replace('pk_', 'sk_'),
    ]) {
      const r = await whoami(server, value === undefined ? {} : { 'x-api-key': value });
      expect(r.status).toBe(401);
      expect(r.body).toEqual(AUTH);
    }
  });

  test('an expiry past the year 9999 is refused with BAD_USER_INPUT, never a 500', async () => {
    for (const at of ['+275760-09-13T00:00:00.000Z', '+010000-01-01T00:00:00.000Z']) {
      const r = await tryCreateKey(server, s.ownerKey, ...pub(), '--expires-at', at);
      expect(r.code).not.toBe(0);
      expect(r.err).toContain('400 BAD_USER_INPUT: expiresAt must be before the year 10000');
    }
    const ok = await tryCreateKey(server, s.ownerKey, ...pub(), '--expires-at', '9999-12-31T00:00:00.000Z');
    expect(ok.code).toBe(0);
  });

  test('an enabled-again key works again', async () => {
    const k = await createKey(server, s.ownerKey, ...pub());
    await cli(server, s.ownerKey, 'api-keys', 'disable', k.id);
    expect((await whoami(server, { 'x-api-key': k.key })).status).toBe(401);
    await cli(server, s.ownerKey, 'api-keys', 'enable', k.id);
    expect((await whoami(server, { 'x-api-key': k.key })).status).toBe(200);
  });

  test('malformed keys and 10 KB header values get the table’s error, never a 500', async () => {
    for (const value of [
      '',
      ' ',
      'pk_',
      'PK_' + 'a'.repeat(48),
      'pk_' + 'g'.repeat(48),
      'sk_t_' + 'a'.repeat(47),
      'x'.repeat(10_240),
      "pk_'; drop table api_keys; --",
      'ck_' + 'a'.repeat(64),
    ]) {
      const r = await whoami(server, { 'x-api-key': value });
      expect(r.status).toBe(401);
      expect(r.body).toEqual(AUTH);
    }
  });

  test('headers with odd characters get the table’s error, never a 500', async () => {
    const raw = (key: Buffer) =>
      new Promise<string>((resolve, reject) => {
        const u = new URL(server.apiUrl);
        const sock = tcpConnect(Number(u.port), u.hostname, () => {
          sock.write(
            Buffer.concat([
              Buffer.from('GET /v1/whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\nx-api-key: '),
              key,
              Buffer.from('\r\n\r\n'),
            ]),
          );
        });
        let out = '';
        sock.on('data', (d) => (out += d.toString('latin1')));
        sock.on('end', () => resolve(out));
        sock.on('error', reject);
      });
    for (const key of [
      Buffer.from('pk_\u00ff\u00fe', 'latin1'),
      Buffer.from('pk_é🔑', 'utf8'),
      Buffer.from('pk_\t' + 'a'.repeat(47)),
    ]) {
      const res = await raw(key);
      const status = Number(res.split(' ')[1]);
      expect([400, 401]).toContain(status);
      if (status === 401) expect(res).toContain('Authentication required');
    }
  });
});

describe('svc api-keys', () => {
  test('create prints { id, key } with --json and the value is never listed', async () => {
    const r = await cliCreateKey(
      server,
      s.ownerKey,
      { name: 'site', type: 'public', scopes: 'records:read' },
      '--models',
      'blogPost,author',
      '--project',
      s.projectId,
      '--json',
    );
    expect(r.code).toBe(0);
    expect(Object.keys(r.json).sort()).toEqual(['id', 'key']);
    expect((await whoami(server, { 'x-api-key': r.json.key })).body.allowedModels).toEqual(['blogPost', 'author']);
    const list = await cli(server, s.ownerKey, 'api-keys', 'list', '--json');
    expect(list.out).not.toContain(r.json.key);
    expect(list.json.keys.find((k: { id: string }) => k.id === r.json.id)).toMatchObject({
      name: 'site',
      kind: 'pk',
      disabled: false,
      allowedModels: ['blogPost', 'author'],
    });
    expect((await cli(server, s.ownerKey, 'api-keys', 'list')).out).toContain(r.json.id);
  });

  test('a project-bound key needs --project; bad models, types and scopes are one clear line', async () => {
    const cases: [string[], string][] = [
      // Outside a config folder pinned to a project (CONTRACT §3: the pin is the default).
      [['--type', 'public', '--scopes', 'records:read'], 'no project: pass --project or pin project.id'],
      [
        ['--type', 'public', '--scopes', 'records:read', '--project', s.projectId, '--models', 'bad model'],
        'is not a model key',
      ],
      [['--type', 'shared', '--scopes', 'records:read', '--project', s.projectId], 'type must be public or secret'],
      [
        ['--type', 'secret', '--scopes', 'records:read,unknown:scope', '--project', s.projectId],
        'unknown scope "unknown:scope"',
      ],
      [['--type', 'secret', '--scopes', 'records:read records:write', '--project', s.projectId], 'contains whitespace'],
      [['--type', 'secret', '--tenant', '--scopes', 'records:read'], 'a tenant key needs a project allow-list'],
      [
        ['--type', 'secret', '--scopes', 'records:read', '--project', s.projectId, '--projects', s.projectId],
        'only for tenant keys',
      ],
    ];
    for (const [args, msg] of cases) {
      const r = await tryCreateKey(server, s.ownerKey, ...args);
      expect(r.code).toBe(1);
      expect(r.err).toContain(msg);
      expect(r.err.trim().split('\n')).toHaveLength(1);
    }
  });

  test('editors and viewers may not manage keys; a project admin may not create tenant keys', async () => {
    const ed = await addMember(server, s.ownerKey, s.projectId, 'ed@k.test', 'editor');
    expect((await tryCreateKey(server, ed.json.controlKey, ...pub())).err).toContain('403');
    const ad = await addMember(server, s.ownerKey, s.projectId, 'ad@k.test', 'admin');
    const own = await tryCreateKey(server, ad.json.controlKey, ...pub());
    expect(own.code).toBe(0);
    const listed = await cli(server, ad.json.controlKey, 'api-keys', 'list', '--json');
    expect(listed.code).toBe(0);
    expect(listed.json.keys.map((k: { id: string }) => k.id)).toContain(own.json.id);
    expect(
      listed.json.keys.every(
        (k: { projectId: string | null; projectIds: string[] }) =>
          k.projectId === s.projectId || k.projectIds.includes(s.projectId),
      ),
    ).toBe(true);
    const t = await tryCreateKey(server, ad.json.controlKey, ...tenantKeyArgs('secret', s.projectId, 'records:read'));
    expect(t.err).toContain('403');
  });

  test('keys of another tenant look absent', async () => {
    const k = await createKey(server, s.ownerKey, ...pub());
    const t2 = await cli(server, server.rootToken, 'tenants', 'create', '--name', 'other', '--json');
    for (const action of ['disable', 'enable', 'delete']) {
      const r = await cli(server, t2.json.controlKey, 'api-keys', action, k.id);
      expect(r.code).toBe(1);
      expect(r.err).toContain('404');
    }
    expect((await whoami(server, { 'x-api-key': k.key })).status).toBe(200);
  });
});
