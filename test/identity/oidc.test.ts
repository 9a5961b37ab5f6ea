import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { folder, minimal } from '../config/support.ts';
import { freePort } from '../../src/store/ports.ts';
import { spawnPeer } from './support.ts';

// argon2id logins on a loaded box are slow: never a reason to fail.
setDefaultTimeout(60_000);

const CB = 'https://app.example/cb';
let server: TestServer;
let base: string;
let clientId: string;
let otherClientId: string;
let projectId: string;

beforeAll(async () => {
  // The issuer is `{base_url}/customer`: the base URL must be the address clients reach.
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = await startTestServer({ PORT: String(port), SVC_BASE_URL: base });
  const p = await bootstrapProject(server, 'shop');
  projectId = p.projectId;
  const config = minimal(p, {
    project: {
      id: p.projectId,
      tenantId: p.tenantId,
      settings: { displayName: 'Acme Shop', primaryColor: '#0a5', customerOtpEnabled: true },
    },
    relyingParties: [
      {
        clientId: 'web',
        name: 'Acme Storefront',
        redirectUris: [CB, 'https://app.example/cb?x=1'],
        allowedScopes: ['openid', 'email', 'profile'],
        allowedOrigins: ['https://app.example'],
      },
      {
        clientId: 'pos',
        name: 'Point of Sale',
        redirectUris: ['https://pos.example/cb'],
        loginMethods: { otp: false },
      },
    ],
  });
  const r = await cli(server, p.ownerKey, 'push', '--dir', folder({ 'svc.config.json': config }), '--json');
  if (r.code !== 0) throw new Error(r.out + r.err);
  clientId = `${p.projectId}.web`;
  otherClientId = `${p.projectId}.pos`;
}, 60_000);
afterAll(() => server.stop());

async function rp(id = clientId) {
  return oidc.discovery(new URL(`${base}/customer`), id, { id_token_signed_response_alg: 'EdDSA' }, oidc.None(), {
    execute: [oidc.allowInsecureRequests],
  });
}

/** The hidden inputs of the form whose step is `step`, as a browser would post them. */
function formOf(page: string, step: string): URLSearchParams {
  const forms = page.split('<form').slice(1);
  const form = forms.find((f) => f.includes(`name="step" value="${step}"`));
  if (!form) throw new Error(`no ${step} form on the page`);
  const out = new URLSearchParams();
  for (const m of form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out.set(
      m[1]!,
      m[2]!.replace(/&#(\d+);/g, (_, c) => String.fromCharCode(Number(c))),
    );
  }
  return out;
}

/** GET the authorize URL, fill the chosen form, POST it; returns the POST response (not followed). */
async function drive(
  url: URL | string,
  step: string,
  fields: Record<string, string>,
): Promise<{ page: Response; post: Response; html: string }> {
  const page = await fetch(url, { redirect: 'manual' });
  const html = await page.text();
  const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0]!;
  const form = formOf(html, step);
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  const post = await fetch(`${base}/auth/authorize`, {
    method: 'POST',
    body: form,
    headers: { cookie },
    redirect: 'manual',
  });
  return { page, post, html };
}

let n = 0;
const email = () => `c${++n}${Math.random().toString(16).slice(2, 8)}@example.com`;
const PASSWORD = 'correct horse battery';

async function authUrl(config: oidc.Configuration, extra: Record<string, string> = {}) {
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: CB,
    scope: 'openid email',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { url, verifier, state, nonce };
}

/** Signs up through the page and returns the redirect to the party with its code. */
async function signUp(config: oidc.Configuration, who = email()) {
  const a = await authUrl(config);
  const { post } = await drive(a.url, 'signup', { email: who, password: PASSWORD, name: 'Ada' });
  expect(post.status).toBe(303);
  return { ...a, email: who, location: new URL(post.headers.get('location')!) };
}

/**
 * The token request exchanging `code` as the party's client at CB with PKCE `verifier` (left
 * out when undefined); `change` replaces fields, for the refusals.
 */
function codeGrant(code: string, verifier?: string, change: Record<string, string> = {}): Record<string, string> {
  return {
    grant_type: 'authorization_code',
    client_id: clientId,
    code,
    redirect_uri: CB,
    ...(verifier === undefined ? {} : { code_verifier: verifier }),
    ...change,
  };
}

const tokenPost = (body: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${base}/customer/oauth/token`, { method: 'POST', body: new URLSearchParams(body), headers });

describe('hosted login: the whole flow with openid-client', () => {
  test('discovery → authorize page → sign up → code → tokens → verify against the JWKS → refresh; then a password login', async () => {
    const config = await rp();
    const meta = config.serverMetadata();
    expect(meta.issuer).toBe(`${base}/customer`);
    expect(meta.authorization_endpoint).toBe(`${base}/auth/authorize`);
    expect(meta.token_endpoint).toBe(`${base}/customer/oauth/token`);
    expect(meta.jwks_uri).toBe(`${base}/.well-known/jwks.json`);
    expect(meta.code_challenge_methods_supported).toEqual(['S256']);
    expect(meta.response_types_supported).toEqual(['code']);
    expect(meta.id_token_signing_alg_values_supported).toEqual(['EdDSA']);

    const s = await signUp(config);
    expect(s.location.origin + s.location.pathname).toBe(CB);
    expect(s.location.searchParams.get('state')).toBe(s.state);
    const tokens = await oidc.authorizationCodeGrant(config, s.location, {
      pkceCodeVerifier: s.verifier,
      expectedState: s.state,
      expectedNonce: s.nonce,
      idTokenExpected: true,
    });
    const claims = tokens.claims()!;
    expect(claims.iss).toBe(`${base}/customer`);
    expect(claims.aud).toBe(clientId);
    expect(claims.nonce).toBe(s.nonce);
    expect(claims.email).toBe(s.email);

    const jwks = createRemoteJWKSet(new URL(`${base}/.well-known/jwks.json`));
    const at = await jwtVerify(tokens.access_token, jwks, { issuer: 'svc-customer', audience: projectId });
    expect(at.protectedHeader.alg).toBe('EdDSA');
    expect(at.payload.sub).toBe(claims.sub);
    const idt = await jwtVerify(tokens.id_token!, jwks, { issuer: `${base}/customer`, audience: clientId });
    expect(idt.payload.sid).toBe(at.payload.sid);

    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    const at2 = await jwtVerify(refreshed.access_token, jwks, { issuer: 'svc-customer', audience: projectId });
    expect(at2.payload.sid).toBe(at.payload.sid);

    // The same account signs in with its password on a second visit.
    const b = await authUrl(config);
    const { post } = await drive(b.url, 'password', { email: s.email, password: PASSWORD });
    expect(post.status).toBe(303);
    const t2 = await oidc.authorizationCodeGrant(config, new URL(post.headers.get('location')!), {
      pkceCodeVerifier: b.verifier,
      expectedState: b.state,
      expectedNonce: b.nonce,
    });
    expect(t2.claims()!.sub).toBe(claims.sub);
  });

  test('the page: party name, branding, labels, tabs as the project and party allow, CSRF, no framing', async () => {
    const { url } = await authUrl(await rp());
    const res = await fetch(url);
    const page = await res.text();
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('set-cookie')).toContain('HttpOnly');
    expect(page).toContain('Acme Storefront');
    expect(page).toContain('Acme Shop');
    expect(page).toContain('#0a5');
    for (const step of ['password', 'otp-request', 'signup']) expect(page).toContain(`value="${step}"`);
    for (const m of page.matchAll(/<input id="([^"]+)"/g)) expect(page).toContain(`<label for="${m[1]}">`);
    expect(page).not.toContain('<script');

    const pos = await rp(otherClientId);
    const v = oidc.randomPKCECodeVerifier();
    const posUrl = oidc.buildAuthorizationUrl(pos, {
      redirect_uri: 'https://pos.example/cb',
      code_challenge: await oidc.calculatePKCECodeChallenge(v),
      code_challenge_method: 'S256',
    });
    const posPage = await (await fetch(posUrl)).text();
    expect(posPage).toContain('Point of Sale');
    expect(posPage).not.toContain('value="otp-request"');
    // A step the party hides cannot be posted by hand either: no code is sent, no redirect.
    const posGet = await fetch(posUrl, { redirect: 'manual' });
    const posHtml = await posGet.text();
    const hidden = formOf(posHtml, 'password');
    hidden.set('step', 'otp-request');
    hidden.set('email', email());
    const otps = async () =>
      (await server.svc.sql<{ n: number }[]>`select count(*)::int as n from customer_otps`)[0]!.n;
    const before = await otps();
    const sneaked = await fetch(`${base}/auth/authorize`, {
      method: 'POST',
      body: hidden,
      headers: { cookie: (posGet.headers.get('set-cookie') ?? '').split(';')[0]! },
      redirect: 'manual',
    });
    expect(sneaked.status).toBeGreaterThanOrEqual(400);
    expect(sneaked.status).toBeLessThan(500);
    expect(sneaked.headers.get('location')).toBeNull();
    expect(await otps()).toBe(before);

    // A form posted without the cookie it was issued with (a cross-site post) is refused.
    const form = formOf(page, 'password');
    form.set('email', email());
    form.set('password', PASSWORD);
    const forged = await fetch(`${base}/auth/authorize`, { method: 'POST', body: form, redirect: 'manual' });
    expect(forged.status).toBe(403);
    expect(forged.headers.get('location')).toBeNull();
  });

  test('without the openid scope the answer has an access token and no ID token', async () => {
    const a = await authUrl(await rp(), { scope: 'email' });
    const { post } = await drive(a.url, 'signup', { email: email(), password: PASSWORD, name: 'Ada' });
    expect(post.status).toBe(303);
    const code = new URL(post.headers.get('location')!).searchParams.get('code')!;
    const res = await tokenPost(codeGrant(code, a.verifier));
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(typeof body.access_token).toBe('string');
    expect(body.token_type).toMatch(/^bearer$/i);
    expect(body.id_token).toBeUndefined();
    expect(body.scope).toBe('email');
  });

  test('a wrong password shows the page again with the error, and no redirect', async () => {
    const s = await signUp(await rp());
    const { url } = await authUrl(await rp());
    const { post } = await drive(url, 'password', { email: s.email, password: 'wrong password here' });
    expect(post.status).toBe(401);
    expect(post.headers.get('location')).toBeNull();
    expect(await post.text()).toContain('Invalid email or password');
  });
});

describe('authorize: bad requests', () => {
  async function authorize(params: Record<string, string>) {
    const challenge = await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier());
    const q = new URLSearchParams({
      client_id: clientId,
      redirect_uri: CB,
      response_type: 'code',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 'st',
      ...params,
    });
    for (const [k, v] of Object.entries(params)) if (v === '\0') q.delete(k);
    return fetch(`${base}/auth/authorize?${q}`, { redirect: 'manual' });
  }

  test('unknown client_id, and each redirect_uri variant, get an error page and never a redirect', async () => {
    const variants = [
      'https://app.example/cb/',
      'https://app.example:8443/cb',
      'http://app.example/cb',
      'https://app.example/cb?x=2',
      'https://app.example/cb?x=1&y=2',
      'https://App.example/cb',
      'https://app.example/CB',
      'https://app.example/cb#frag',
      'https://app.example/c',
      'https://app.example/cb@evil.example',
      'https://app.example@evil.example/cb',
      '//evil.example/cb',
      'https://evil.example/cb',
      'https://app.example/cb/../cb',
      'https://app.example/%63b',
    ];
    for (const redirect_uri of variants) {
      const res = await authorize({ redirect_uri });
      expect({ redirect_uri, status: res.status, location: res.headers.get('location') }).toEqual({
        redirect_uri,
        status: 400,
        location: null,
      });
    }
    for (const client_id of ['nope', `${projectId}.nope`, 'prj_x.web', `${projectId}.WEB`]) {
      const res = await authorize({ client_id });
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(await res.text()).toContain('unknown client_id');
    }
    // The registered URI with its own query matches exactly and works.
    expect((await authorize({ redirect_uri: 'https://app.example/cb?x=1' })).status).toBe(200);
  });

  test('missing or plain PKCE, a foreign scope and a wrong response_type redirect back with the RFC 6749 error and the state', async () => {
    const cases: [Record<string, string>, string][] = [
      [{ code_challenge: '\0', code_challenge_method: '\0' }, 'invalid_request'],
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge_method: '\0' }, 'invalid_request'],
      [{ scope: 'openid admin' }, 'invalid_scope'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
    ];
    for (const [params, error] of cases) {
      const res = await authorize(params);
      expect(res.status).toBe(303);
      const loc = new URL(res.headers.get('location')!);
      expect(loc.origin + loc.pathname).toBe(CB);
      expect(loc.searchParams.get('error')).toBe(error);
      expect(loc.searchParams.get('state')).toBe('st');
      expect(loc.searchParams.get('code')).toBeNull();
    }
  });
});

describe('token endpoint: bad grants get invalid_grant and no token', () => {
  test('a reused code is refused and revokes what it issued', async () => {
    const config = await rp();
    const s = await signUp(config);
    const code = s.location.searchParams.get('code')!;
    const first = await tokenPost(codeGrant(code, s.verifier));
    expect(first.status).toBe(200);
    const issued = (await first.json()) as { access_token: string; refresh_token: string };
    const userinfo = () =>
      fetch(`${base}/customer/oauth/userinfo`, { headers: { authorization: `Bearer ${issued.access_token}` } });
    expect((await userinfo()).status).toBe(200);
    const again = await tokenPost(codeGrant(code, s.verifier));
    expect(again.status).toBe(400);
    // The access token it issued no longer works either.
    expect((await userinfo()).status).toBe(401);
    expect(((await again.json()) as { error: string }).error).toBe('invalid_grant');
    // The refresh token it issued is dead, and so is the access token.
    const refresh = await tokenPost({
      grant_type: 'refresh_token',
      client_id: clientId,
      refresh_token: issued.refresh_token,
    });
    expect(refresh.status).toBe(400);
    expect(((await refresh.json()) as { error: string }).error).toBe('invalid_grant');
    const [row] = await server.svc.sql<{ revoked_reason: string }[]>`
      select s.revoked_reason from oauth_codes o join customer_sessions s on s.id = o.session_id where o.customer_id = (select id from customers where email = ${s.email})`;
    expect(row!.revoked_reason).toBe('authorization_code_reuse');
  });

  test('code of another client, wrong verifier, wrong redirect_uri, expired code, garbage', async () => {
    const config = await rp();
    const bad = async (body: Record<string, string>) => {
      const res = await tokenPost(body);
      const json = (await res.json()) as Record<string, unknown>;
      expect(res.status).toBe(400);
      expect(json.error).toBe('invalid_grant');
      expect(json.access_token).toBeUndefined();
    };
    const a = await signUp(config);
    await bad(codeGrant(a.location.searchParams.get('code')!, a.verifier, { client_id: otherClientId }));
    const b = await signUp(config);
    await bad(codeGrant(b.location.searchParams.get('code')!, oidc.randomPKCECodeVerifier()));
    const c = await signUp(config);
    await bad(
      codeGrant(c.location.searchParams.get('code')!, c.verifier, { redirect_uri: 'https://app.example/cb?x=1' }),
    );
    const d = await signUp(config);
    await server.svc
      .sql`update oauth_codes set expires_at = now() - interval '1 second' where customer_id = (select id from customers where email = ${d.email})`;
    await bad(codeGrant(d.location.searchParams.get('code')!, d.verifier));
    await bad(codeGrant('ac_nope', d.verifier));
    // A missing verifier is a wrong verifier.
    const e = await signUp(config);
    await bad(codeGrant(e.location.searchParams.get('code')!));

    const unknown = await tokenPost({ grant_type: 'authorization_code', client_id: 'nope', code: 'x' });
    expect(unknown.status).toBe(401);
    expect(((await unknown.json()) as { error: string }).error).toBe('invalid_client');
    const grant = await tokenPost({ grant_type: 'password', client_id: clientId });
    expect(((await grant.json()) as { error: string }).error).toBe('unsupported_grant_type');
  });

  test("CORS only for the party's allowedOrigins", async () => {
    const ok = await tokenPost(
      { grant_type: 'refresh_token', client_id: clientId, refresh_token: 'x' },
      { origin: 'https://app.example' },
    );
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const other = await tokenPost(
      { grant_type: 'refresh_token', client_id: clientId, refresh_token: 'x' },
      { origin: 'https://evil.example' },
    );
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    const pos = await tokenPost(
      { grant_type: 'refresh_token', client_id: otherClientId, refresh_token: 'x' },
      { origin: 'https://app.example' },
    );
    expect(pos.headers.get('access-control-allow-origin')).toBeNull();
    const pre = await fetch(`${base}/customer/oauth/token`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('two processes on one database', () => {
  test('a code issued by one process is exchanged at another; replaying it at the first ends the session (the peer refuses its refresh token)', async () => {
    // Both processes stand behind one address (one issuer), as behind a load balancer.
    const peer = await spawnPeer(server, { SVC_BASE_URL: base });
    try {
      const s = await signUp(await rp());
      const code = s.location.searchParams.get('code')!;
      const res = await fetch(`${peer.apiUrl}/customer/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams(codeGrant(code, s.verifier)),
      });
      expect(res.status).toBe(200);
      const issued = (await res.json()) as { id_token: string; refresh_token: string };
      const jwks = createRemoteJWKSet(new URL(`${base}/.well-known/jwks.json`));
      const idt = await jwtVerify(issued.id_token, jwks, { issuer: `${base}/customer`, audience: clientId });
      expect(idt.payload.nonce).toBe(s.nonce);

      const replay = await tokenPost(codeGrant(code, s.verifier));
      expect(((await replay.json()) as { error: string }).error).toBe('invalid_grant');
      const refresh = await fetch(`${peer.apiUrl}/customer/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'refresh_token',
          client_id: clientId,
          refresh_token: issued.refresh_token,
        }),
      });
      expect(refresh.status).toBe(400);
      expect(((await refresh.json()) as { error: string }).error).toBe('invalid_grant');
    } finally {
      await peer.stop();
    }
  });
});
