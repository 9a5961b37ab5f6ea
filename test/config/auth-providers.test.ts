import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { freePort } from '../../src/store/ports.ts';
import { authRequest, Browser, discover, formOf } from '../identity/oidc-support.ts';
import { folder, minimal, pushMinimal } from './support.ts';

setDefaultTimeout(60_000);

/**
 * The spec's own auth-provider example (`config`: "a client id and allowed domains") pushes: it
 * is stored, reported as a warning beside `errors` in `svc push --json`, and cannot log anyone in
 * (no button, a clear refusal) until it has an issuer or the endpoints.
 */
const WEB = 'https://app.example/cb';
let server: TestServer;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = await startTestServer({ PORT: String(port), SVC_BASE_URL: base });
}, 60_000);
afterAll(() => server.stop());

const SPEC_EXAMPLE = {
  key: 'corp',
  name: 'Corp SSO',
  type: 'oauth2',
  enabled: true,
  isDefault: true,
  priority: 1,
  config: { clientId: 'corp-client', allowedDomains: ['corp.example'] },
};

describe('an auth provider that cannot log anyone in yet', () => {
  test('is accepted, stored, reported as a warning; the push exits 0; no login button until it has an issuer', async () => {
    const p = await bootstrapProject(server, 'spec-provider');
    const config = minimal(p, {
      authProviders: [SPEC_EXAMPLE],
      relyingParties: [{ clientId: 'web', name: 'Web', redirectUris: [WEB] }],
    });
    const dir = folder({ 'svc.config.json': config });
    const r = await cli(server, p.ownerKey, 'push', '--json', '--dir', dir);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.json.errors).toEqual([]);
    expect(r.json.applied.authProviders).toBe(1);
    expect(r.json.warnings).toHaveLength(1);
    expect(r.json.warnings[0].path).toBe('authProviders[0].config');
    expect(r.json.warnings[0].message).toContain('cannot log anyone in yet');
    expect(r.json.warnings[0].message).toContain('issuer');
    // Stored as declared (pull gives it back), held disabled.
    const rows = await server.svc
      .sql`select key, enabled, definition from auth_providers where project_id = ${p.projectId}`;
    expect(rows.map((x) => [x.key, x.enabled, x.definition.config])).toEqual([['corp', false, SPEC_EXAMPLE.config]]);
    const pulled = await cli(server, p.ownerKey, 'pull', '--json', '--dir', dir);
    expect(pulled.json.authProviders).toEqual([SPEC_EXAMPLE]);
    // Text output: a warning line, no error line.
    const text = await cli(server, p.ownerKey, 'push', '--dir', dir);
    expect(text.code).toBe(0);
    expect(text.out).toContain('warning: authProviders[0].config:');
    expect(text.out).not.toContain('error:');

    // The hosted login shows no button for it, and a hand-made post is refused clearly.
    const rp = await discover(`${base}/customer`, `${p.projectId}.web`);
    const b = new Browser();
    const a = await authRequest(rp, WEB);
    const page = await (await b.fetch(a.url)).text();
    expect(page).not.toContain('Continue with Corp SSO');
    const { action, form } = formOf(page, 'password');
    form.set('step', 'upstream');
    form.set('provider', 'corp');
    const refused = await b.fetch(new URL(action, base), { method: 'POST', body: form });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain('Corp SSO is not set up yet');

    // With an issuer it is enabled at the next push: the button appears.
    const fixed = minimal(p, {
      authProviders: [{ ...SPEC_EXAMPLE, config: { ...SPEC_EXAMPLE.config, issuer: 'https://sso.corp.example' } }],
      relyingParties: [{ clientId: 'web', name: 'Web', redirectUris: [WEB] }],
    });
    const again = await cli(server, p.ownerKey, 'push', '--json', '--dir', folder({ 'svc.config.json': fixed }));
    expect(again.code).toBe(0);
    expect(again.json.warnings).toEqual([]);
    expect(
      (await server.svc.sql`select enabled from auth_providers where project_id = ${p.projectId} and key = 'corp'`)[0]!
        .enabled,
    ).toBe(true);
    const shown = await (await b.fetch((await authRequest(rp, WEB)).url)).text();
    expect(shown).toContain('Continue with Corp SSO');
  });

  test('an invalid provider is still an error: bad URLs, a plaintext secret, no client id', async () => {
    const p = await bootstrapProject(server, 'bad-provider');
    const r = await pushMinimal(server, p, {
      authProviders: [
        { key: 'a', name: 'A', type: 'oauth2', config: { allowedDomains: ['corp.example'] } },
        {
          key: 'b',
          name: 'B',
          type: 'oauth2',
          config: { clientId: 'x', issuer: 'http://idp.example', clientSecret: 'PLAINTEXT' },
        },
      ],
    });
    expect(r.code).not.toBe(0);
    const messages = r.json.errors.map((e: { path: string; message: string }) => `${e.path}: ${e.message}`).join('\n');
    expect(messages).toContain('authProviders[0].config.clientId: clientId is required');
    expect(messages).toContain('authProviders[1].config.issuer');
    expect(messages).toContain('authProviders[1].config.clientSecret');
    expect(r.json.warnings).toEqual(expect.any(Array));
  });
});
