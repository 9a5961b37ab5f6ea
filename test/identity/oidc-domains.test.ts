import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import * as oidc from 'openid-client';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { startDnsServer } from '../support/dns-server.ts';
import { folder, minimal } from '../config/support.ts';
import { freePort } from '../../src/store/ports.ts';
import { authRequest, Browser, discover, newEmail, PASSWORD } from './oidc-support.ts';
import { spawnPeer } from './support.ts';

setDefaultTimeout(90_000);

const DOMAIN = 'login.acme.test';
const WEB = 'https://app.example/cb';
const ACCOUNT = 'https://app.example/account';
let server: TestServer;
let port: number;
let custom: string;
let projectId: string;
let pushText: string;
let dns: { address: string; close(): void };
let otherClient: string;

/** fetch for openid-client: the custom domain resolves to the local server, Host kept. */
const viaLocal = ((url: string, init: RequestInit) => {
  const u = new URL(url);
  if (u.hostname !== DOMAIN) return fetch(url, init);
  const headers = new Headers(init.headers);
  headers.set('host', u.host);
  return fetch(`http://127.0.0.1:${u.port}${u.pathname}${u.search}`, { ...init, headers });
}) as typeof fetch;

beforeAll(async () => {
  port = await freePort();
  custom = `http://${DOMAIN}:${port}`;
  const records = { txt: new Map<string, string>(), cname: new Map<string, string>() };
  dns = await startDnsServer(records);
  process.env.SVC_DNS_SERVER = dns.address;
  server = await startTestServer({ PORT: String(port), SVC_BASE_URL: `http://127.0.0.1:${port}` });
  const p = await bootstrapProject(server, 'domains');
  projectId = p.projectId;
  const other = await bootstrapProject(server, 'other');
  const config = minimal(p, {
    project: {
      id: p.projectId,
      tenantId: p.tenantId,
      settings: { displayName: 'Acme Accounts', primaryColor: '#a30' },
    },
    relyingParties: [
      {
        clientId: 'web',
        name: 'Acme Web',
        redirectUris: [WEB],
        allowedOrigins: ['https://app.example'],
        customDomains: [DOMAIN],
        postLoginUrl: ACCOUNT,
      },
    ],
  });
  const dir = folder({ 'svc.config.json': config });
  // Before the records exist the domain serves nothing.
  const r = await cli(server, p.ownerKey, 'push', '--dir', dir);
  if (r.code !== 0) throw new Error(r.out + r.err);
  pushText = r.out;
  const pending = await new Browser({ [`${DOMAIN}:${port}`]: `127.0.0.1:${port}` }).fetch(
    `${custom}/authorize?client_id=${p.projectId}.web`,
  );
  if (pending.status !== 404) throw new Error(`a pending domain answered ${pending.status}`);
  const token = /TXT _svc-challenge\.login\.acme\.test (\S+)/.exec(r.out)![1]!;
  records.txt.set(`_svc-challenge.${DOMAIN}`, token);
  records.cname.set(DOMAIN, '127.0.0.1');
  const v = await cli(server, p.ownerKey, 'domains', 'verify', DOMAIN, '--dir', dir, '--json');
  if (v.code !== 0) throw new Error(v.out + v.err);
  const o = await cli(
    server,
    other.ownerKey,
    'push',
    '--dir',
    folder({
      'svc.config.json': minimal(other, { relyingParties: [{ clientId: 'web', name: 'Other', redirectUris: [WEB] }] }),
    }),
    '--json',
  );
  if (o.code !== 0) throw new Error(o.out + o.err);
  otherClient = `${other.projectId}.web`;
}, 90_000);
afterAll(async () => {
  delete process.env.SVC_DNS_SERVER;
  dns.close();
  await server.stop();
});

const browser = () => new Browser({ [`${DOMAIN}:${port}`]: `127.0.0.1:${port}` });

/** The negative answer for the pending domain is cached for a few seconds. */
async function customDiscovery(): Promise<oidc.Configuration> {
  const end = Date.now() + 20_000;
  for (;;) {
    try {
      return await discover(custom, `${projectId}.web`, viaLocal);
    } catch (err) {
      if (Date.now() > end) throw err;
      await Bun.sleep(250);
    }
  }
}

describe('custom domains', () => {
  test('svc push prints the DNS challenge of a new domain: the CNAME target and the _svc-challenge TXT value', () => {
    expect(pushText).toContain(
      `domain ${DOMAIN} is pending; add these DNS records, then run svc domains verify ${DOMAIN}:`,
    );
    expect(pushText).toContain(`CNAME ${DOMAIN} 127.0.0.1`);
    expect(pushText).toMatch(new RegExp(`TXT _svc-challenge\\.${DOMAIN.replace(/\./g, '\\.')} [0-9a-f]{32}`));
  });

  test('a verified domain is its own OpenID provider by Host: discovery, the branded page, tokens whose issuer is the domain', async () => {
    const config = await customDiscovery();
    const meta = config.serverMetadata();
    expect(meta.issuer).toBe(custom);
    expect(meta.authorization_endpoint).toBe(`${custom}/authorize`);
    expect(meta.token_endpoint).toBe(`${custom}/oauth/token`);
    const a = await authRequest(config, WEB);
    expect(a.url.host).toBe(`${DOMAIN}:${port}`);
    const b = browser();
    const page = await (await b.fetch(a.url)).text();
    expect(page).toContain('Acme Accounts');
    expect(page).toContain('Acme Web');
    const email = newEmail();
    const post = await b.post(a.url, page, 'signup', { email, password: PASSWORD });
    expect(post.status).toBe(303);
    const loc = new URL(post.headers.get('location')!);
    expect(loc.searchParams.get('iss')).toBe(custom);
    const tokens = await oidc.authorizationCodeGrant(config, loc, {
      pkceCodeVerifier: a.verifier,
      expectedState: a.state,
      expectedNonce: a.nonce,
      idTokenExpected: true,
    });
    expect(tokens.claims()!.iss).toBe(custom);
    expect(tokens.claims()!.email).toBe(email);
    // The cookie lives on the domain, for the whole host.
    expect(post.headers.getSetCookie().find((c) => c.startsWith(`svc_session_${projectId}=`))).toContain('Path=/;');

    // A code from the domain is not exchanged under the deployment's issuer.
    const a2 = await authRequest(config, WEB, { prompt: 'login' });
    const p2 = await b.submit(a2.url, 'password', { email, password: PASSWORD });
    const code = new URL(p2.post.headers.get('location')!).searchParams.get('code')!;
    const res = await fetch(`http://127.0.0.1:${port}/customer/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        client_id: `${projectId}.web`,
        code,
        redirect_uri: WEB,
        code_verifier: a2.verifier,
      }),
    });
    expect(((await res.json()) as { error: string }).error).toBe('invalid_grant');
  });

  test('a bare visit signs in and lands on postLoginUrl; the next bare visit and the next authorize go straight through', async () => {
    await customDiscovery();
    const b = browser();
    const first = await b.fetch(`${custom}/`);
    const page = await first.text();
    expect(first.status).toBe(200);
    expect(page).toContain('action="/"');
    const email = newEmail();
    const post = await b.post(`${custom}/`, page, 'signup', { email, password: PASSWORD });
    expect(post.status).toBe(303);
    expect(post.headers.get('location')).toBe(ACCOUNT);
    const again = await b.fetch(`${custom}/`);
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe(ACCOUNT);
    const config = await customDiscovery();
    const a = await authRequest(config, WEB);
    const silent = await b.fetch(a.url);
    expect(silent.status).toBe(303);
    const tokens = await oidc.authorizationCodeGrant(config, new URL(silent.headers.get('location')!), {
      pkceCodeVerifier: a.verifier,
      expectedState: a.state,
      expectedNonce: a.nonce,
    });
    expect(tokens.claims()!.email).toBe(email);
  });

  test("another project's party is not served on the domain; an unknown host serves no login", async () => {
    await customDiscovery();
    const challenge = await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier());
    const q = new URLSearchParams({
      client_id: otherClient,
      redirect_uri: WEB,
      response_type: 'code',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
    const res = await browser().fetch(`${custom}/authorize?${q}`);
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    const stranger = new Browser({ [`login.nope.test:${port}`]: `127.0.0.1:${port}` });
    expect((await stranger.fetch(`http://login.nope.test:${port}/authorize?${q}`)).status).toBe(404);
    expect((await stranger.fetch(`http://login.nope.test:${port}/`)).status).toBe(404);
    expect((await stranger.fetch(`http://login.nope.test:${port}/.well-known/openid-configuration`)).status).toBe(404);
  });

  test('two processes: the domain verified through one is served by the other, which exchanges the code the first issued', async () => {
    const config = await customDiscovery();
    const peer = await spawnPeer(server, { SVC_BASE_URL: `http://127.0.0.1:${port}` });
    try {
      const peerAddr = new URL(peer.apiUrl).host;
      // The same public address, answered by the peer (as behind a load balancer).
      const viaPeer = new Browser({ [`${DOMAIN}:${port}`]: peerAddr });
      const doc = (await (await viaPeer.fetch(`${custom}/.well-known/openid-configuration`)).json()) as {
        issuer: string;
      };
      expect(doc.issuer).toBe(custom);
      const a = await authRequest(config, WEB);
      const b = browser();
      const { post } = await b.submit(a.url, 'signup', { email: newEmail(), password: PASSWORD });
      const code = new URL(post.headers.get('location')!).searchParams.get('code')!;
      const res = await viaPeer.fetch(`${custom}/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          client_id: `${projectId}.web`,
          code,
          redirect_uri: WEB,
          code_verifier: a.verifier,
        }),
      });
      expect(res.status).toBe(200);
      // The browser session made on the first process signs in on the peer.
      viaPeer.jar.set(`${DOMAIN}:${port}`, b.cookies(`${DOMAIN}:${port}`));
      const again = await viaPeer.fetch(`${custom}/`);
      expect(again.status).toBe(303);
      expect(again.headers.get('location')).toBe(ACCOUNT);
    } finally {
      await peer.stop();
    }
  });
});
