import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { runCli } from '../../src/cli/main.ts';
import { memberKey } from '../auth/support.ts';
import { folder, minimal } from './support.ts';
import { startDnsServer } from '../support/dns-server.ts';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.stop());

const push = (key: string, dir: string) => cli(server, key, 'push', '--dir', dir, '--json');
const party = (extra: Record<string, unknown> = {}) => ({
  clientId: 'web',
  name: 'Web',
  redirectUris: ['https://w.example/cb'],
  ...extra,
});
const write = (dir: string, config: unknown) => writeFileSync(join(dir, 'svc.config.json'), JSON.stringify(config));

describe('relying parties', () => {
  test('omitted allowedOrigins leaves the stored list, [] clears it, and parties are customer-lane', async () => {
    const p = await bootstrapProject(server, 'origins');
    const dir = folder({
      'svc.config.json': minimal(p, { relyingParties: [party({ allowedOrigins: ['https://w.example'] })] }),
    });
    await push(p.ownerKey, dir);
    write(dir, minimal(p, { relyingParties: [party({ name: 'Web 2' })] }));
    await push(p.ownerKey, dir);
    const origins = async () =>
      (await server.svc.sql`select kind, allowed_origins from relying_parties where project_id = ${p.projectId}`)[0]!;
    expect(await origins()).toEqual({ kind: 'customer', allowed_origins: ['https://w.example'] });
    write(dir, minimal(p, { relyingParties: [party({ allowedOrigins: [] })] }));
    await push(p.ownerKey, dir);
    expect((await origins()).allowed_origins).toEqual([]);
  });

  test('customDomains registers pending domains with a DNS challenge and prunes removed ones', async () => {
    const p = await bootstrapProject(server, 'domains');
    const dir = folder({
      'svc.config.json': minimal(p, {
        relyingParties: [party({ customDomains: ['login.a.example', 'login.b.example'] })],
      }),
    });
    const r = await push(p.ownerKey, dir);
    expect(r.code).toBe(0);
    expect(r.json.domains).toHaveLength(2);
    expect(r.json.domains[0].status).toBe('pending');
    expect(r.json.domains[0].records.map((x: { type: string; name: string }) => [x.type, x.name])).toEqual([
      ['CNAME', 'login.a.example'],
      ['TXT', '_svc-challenge.login.a.example'],
    ]);
    const pulled = await cli(server, p.ownerKey, 'pull', '--dir', dir, '--json');
    expect(pulled.json.domains.map((d: { domain: string }) => d.domain)).toEqual([
      'login.a.example',
      'login.b.example',
    ]);
    write(dir, minimal(p, { relyingParties: [party({ customDomains: ['login.b.example'] })] }));
    await push(p.ownerKey, dir);
    const rows = await server.svc.sql`select domain from custom_domains where project_id = ${p.projectId}`;
    expect(rows.map((x) => x.domain)).toEqual(['login.b.example']);
  });

  test("an editor's push that adds a domain fails for that entry naming domains:write while the rest applies", async () => {
    const p = await bootstrapProject(server, 'editor');
    const dir = folder({ 'svc.config.json': minimal(p, { relyingParties: [party()] }) });
    await push(p.ownerKey, dir);
    const editor = await memberKey(server, p, 'editor');
    write(
      dir,
      minimal(p, {
        operations: [{ key: 'op', endpoint: 'https://x.example/op' }],
        relyingParties: [party({ customDomains: ['login.e.example'] })],
      }),
    );
    const r = await push(editor, dir);
    expect(r.code).not.toBe(0);
    expect(r.json.errors).toEqual([
      {
        path: 'relyingParties[0].customDomains[0]',
        message: 'adding domain login.e.example needs permission domains:write',
      },
    ]);
    expect(r.json.applied.operations).toBe(1);
    expect(
      (await server.svc.sql`select count(*)::int as n from custom_domains where project_id = ${p.projectId}`)[0]!.n,
    ).toBe(0);
  });

  test('creating a relying party needs relyingparties:write', async () => {
    const p = await bootstrapProject(server, 'rpw');
    const r = await push(
      await memberKey(server, p, 'editor'),
      folder({ 'svc.config.json': minimal(p, { relyingParties: [party()] }) }),
    );
    expect(r.code).not.toBe(0);
    expect(r.json.errors[0].message).toContain('relyingparties:write');
  });

  test('svc domains verify checks both records (CNAME to the auth host, TXT challenge) and marks the domain verified', async () => {
    const p = await bootstrapProject(server, 'verify');
    const dir = folder({
      'svc.config.json': minimal(p, { relyingParties: [party({ customDomains: ['login.v.example'] })] }),
    });
    const r = await push(p.ownerKey, dir);
    const [cname, txt] = r.json.domains[0].records;
    expect(cname).toEqual({ type: 'CNAME', name: 'login.v.example', value: new URL(server.apiUrl).hostname });
    expect(r.out).not.toContain('pending;'); // --json prints the object only
    const token = txt.value;
    const records = { txt: new Map<string, string>(), cname: new Map<string, string>() };
    const dns = await startDnsServer(records);
    process.env.SVC_DNS_SERVER = dns.address;
    try {
      const before = await cli(server, p.ownerKey, 'domains', 'verify', 'login.v.example', '--dir', dir, '--json');
      expect(before.code).toBe(1);
      expect(before.json.verified).toBe(false);
      expect(before.json.checks).toEqual({ cname: false, txt: false });
      // The TXT record alone is not enough: the domain must also point at the auth host.
      records.txt.set('_svc-challenge.login.v.example', token);
      const half = await cli(server, p.ownerKey, 'domains', 'verify', 'login.v.example', '--dir', dir, '--json');
      expect(half.code).toBe(1);
      expect(half.json.checks).toEqual({ cname: false, txt: true });
      expect(half.json.reason).toContain('CNAME');
      records.cname.set('login.v.example', 'elsewhere.example');
      const wrong = await cli(server, p.ownerKey, 'domains', 'verify', 'login.v.example', '--dir', dir, '--json');
      expect(wrong.json.checks).toEqual({ cname: false, txt: true });
      records.txt.set('_svc-challenge.login.v.example', 'not-the-token');
      records.cname.set('login.v.example', cname.value);
      const wrongTxt = await cli(server, p.ownerKey, 'domains', 'verify', 'login.v.example', '--dir', dir, '--json');
      expect(wrongTxt.json.checks).toEqual({ cname: true, txt: false });
      records.txt.set('_svc-challenge.login.v.example', token);
      const after = await cli(server, p.ownerKey, 'domains', 'verify', 'login.v.example', '--dir', dir, '--json');
      expect(after.code).toBe(0);
      expect(after.json.status).toBe('verified');
    } finally {
      delete process.env.SVC_DNS_SERVER;
      dns.close();
    }
  });
});

describe('secrets, customer roles and init', () => {
  test('secrets push stores encrypted values and reports created, updated and unchanged labels only', async () => {
    const p = await bootstrapProject(server, 'secrets');
    const dir = folder({
      'svc.config.json': minimal(p),
      'svc.secrets.json': {
        secrets: [
          { ownerKind: 'project', label: 'stripeKey' },
          { ownerKind: 'project', label: 'mailKey' },
        ],
      },
      'svc.secrets.local.json': { stripeKey: 'sk_live_PLAINTEXT_1', mailKey: 'mail-PLAINTEXT-2' },
    });
    const first = await cli(server, p.ownerKey, 'secrets', 'push', '--dir', dir, '--json');
    expect(first.json).toEqual({ created: ['stripeKey', 'mailKey'], updated: [], unchanged: [] });
    writeFileSync(
      join(dir, 'svc.secrets.local.json'),
      JSON.stringify({ stripeKey: 'sk_live_PLAINTEXT_3', mailKey: 'mail-PLAINTEXT-2' }),
    );
    const second = await cli(server, p.ownerKey, 'secrets', 'push', '--dir', dir, '--json');
    expect(second.json).toEqual({ created: [], updated: ['stripeKey'], unchanged: ['mailKey'] });
    expect(second.out + first.out).not.toContain('PLAINTEXT');
    const dump = JSON.stringify(
      await server.svc.sql`select encode(ciphertext, 'escape') as c from secrets where project_id = ${p.projectId}`,
    );
    expect(dump).not.toContain('PLAINTEXT');
  });

  test('secrets push refuses under SVC_ENV=production, in the CLI and on the server', async () => {
    const p = await bootstrapProject(server, 'prod');
    const dir = folder({
      'svc.config.json': minimal(p),
      'svc.secrets.json': { secrets: [{ ownerKind: 'project', label: 'a' }] },
      'svc.secrets.local.json': { a: 'x' },
    });
    let err = '';
    const code = await runCli(
      ['secrets', 'push', '--dir', dir],
      { out: () => {}, err: (s) => (err += s) },
      { SVC_URL: server.apiUrl, SVC_TOKEN: p.ownerKey, SVC_ENV: 'production' },
    );
    expect(code).toBe(1);
    expect(err).toContain('production');
    const prod = await startTestServer({ SVC_ENV: 'production' });
    try {
      const q = await bootstrapProject(prod, 'prod2');
      const d2 = folder({
        'svc.config.json': minimal(q),
        'svc.secrets.json': { secrets: [{ ownerKind: 'project', label: 'a' }] },
        'svc.secrets.local.json': { a: 'x' },
      });
      const r = await cli(prod, q.ownerKey, 'secrets', 'push', '--dir', d2);
      expect(r.code).toBe(1);
      expect(r.err).toContain('production');
    } finally {
      await prod.stop();
    }
  });

  test('customer-roles list, create, update, disable, assign, revoke and assignments', async () => {
    const p = await bootstrapProject(server, 'crcli');
    const run = (...a: string[]) => cli(server, p.ownerKey, 'customer-roles', ...a, '--project', p.projectId, '--json');
    expect(
      (await run('create', '--key', 'vip', '--name', 'VIP', '--permissions', 'records:read,operations:execute')).json
        .key,
    ).toBe('vip');
    expect((await run('update', '--key', 'vip', '--name', 'Very important')).json.name).toBe('Very important');
    expect((await run('assign', '--key', 'vip', '--customer', 'cus_1')).json.customerId).toBe('cus_1');
    expect((await run('assignments', '--customer', 'cus_1')).json.map((a: { roleKey: string }) => a.roleKey)).toEqual([
      'vip',
    ]);
    expect((await run('revoke', '--key', 'vip', '--customer', 'cus_1')).json.revoked).toBe(true);
    expect((await run('disable', '--key', 'vip')).json.disabled).toBe(true);
    expect((await run('list')).json).toHaveLength(1);
    expect((await run('create', '--key', 'bad', '--name', 'B', '--permissions', 'nope:scope')).code).toBe(1);
  });

  test('svc init && svc push && svc pull works in a fresh folder', async () => {
    const p = await bootstrapProject(server, 'init');
    const dir = folder({});
    expect((await cli(server, p.ownerKey, 'init', '--dir', dir, '--project', p.projectId)).code).toBe(0);
    const { readFileSync } = await import('node:fs');
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toContain('svc.secrets.local.json');
    const pushed = await cli(server, p.ownerKey, 'push', '--dir', dir, '--json');
    expect(pushed.json.errors).toEqual([]);
    expect(pushed.json.applied.models).toBe(1);
    expect(readFileSync(join(dir, '.env'), 'utf8')).toMatch(/^SVC_PUBLIC_KEY=pk_/m);
    const pulled = await cli(server, p.ownerKey, 'pull', '--dir', dir, '--json');
    expect(pulled.json.models[0].key).toBe('page');
    expect(JSON.parse(readFileSync(join(dir, 'svc.settings.json'), 'utf8')).customerSignupEnabled).toBe(true);
  });
});
