import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import * as oidc from 'openid-client';
import { createHash } from 'node:crypto';
import { decodeJwt } from 'jose';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { folder, minimal } from '../config/support.ts';
import { freePort } from '../../src/store/ports.ts';
import { spawnPeer } from './support.ts';
import { authRequest, Browser, discover, newEmail, PASSWORD } from './oidc-support.ts';

// argon2id logins on a loaded box are slow: never a reason to fail.
setDefaultTimeout(90_000);

const WEB = 'https://app.example/cb';
const SHOP = 'https://shop.example/cb';
const LEGACY = 'https://legacy.example/cb';
let server: TestServer;
let base: string;
let projectId: string;
const rp: Record<string, oidc.Configuration> = {};

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = await startTestServer({ PORT: String(port), SVC_BASE_URL: base });
  const p = await bootstrapProject(server, 'sessions');
  projectId = p.projectId;
  const config = minimal(p, {
    project: { id: p.projectId, tenantId: p.tenantId, settings: { displayName: 'Acme' } },
    relyingParties: [
      { clientId: 'web', name: 'Web', redirectUris: [WEB], allowedOrigins: ['https://app.example'] },
      { clientId: 'shop', name: 'Shop', redirectUris: [SHOP], allowedOrigins: ['https://shop.example'] },
      { clientId: 'legacy', name: 'Legacy', redirectUris: [LEGACY] },
    ],
  });
  const r = await cli(server, p.ownerKey, 'push', '--dir', folder({ 'svc.config.json': config }), '--json');
  if (r.code !== 0) throw new Error(r.out + r.err);
  for (const k of ['web', 'shop', 'legacy']) rp[k] = await discover(`${base}/customer`, `${p.projectId}.${k}`);
}, 90_000);
afterAll(() => server.stop());

const cookieName = () => `svc_session_${projectId}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** Signs up through the web party's page in `browser`; returns the tokens. */
async function signUpAt(browser: Browser, party = 'web', redirect = WEB) {
  const a = await authRequest(rp[party]!, redirect);
  const email = newEmail();
  const { post } = await browser.submit(a.url, 'signup', { email, password: PASSWORD, name: 'Ada' });
  expect(post.status).toBe(303);
  const tokens = await oidc.authorizationCodeGrant(rp[party]!, new URL(post.headers.get('location')!), {
    pkceCodeVerifier: a.verifier,
    expectedState: a.state,
    expectedNonce: a.nonce,
    idTokenExpected: true,
  });
  return { email, tokens, post };
}

/** An authorize in `browser` that must answer without a page: the redirect with a code, exchanged. */
async function silent(browser: Browser, party: string, redirect: string, extra: Record<string, string> = {}) {
  const a = await authRequest(rp[party]!, redirect, extra);
  const res = await browser.fetch(a.url);
  return { res, a };
}

describe('browser sessions at the hosted login', () => {
  test('a login sets an HttpOnly SameSite=Lax cookie stored hashed; a second party in the same browser gets its code without a prompt, and the cookie rotates', async () => {
    const browser = new Browser();
    const first = await signUpAt(browser);
    const setCookie = first.post.headers.getSetCookie().find((c) => c.startsWith(`${cookieName()}=`))!;
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Lax');
    expect(setCookie).toContain('Path=/auth');
    expect(setCookie).not.toContain('Secure'); // plain http in development
    const token = browser.cookies(new URL(base).host).get(cookieName())!;
    const rows = await server.svc.sql`select token_hash from auth_browser_sessions where project_id = ${projectId}`;
    expect(JSON.stringify(rows)).not.toContain(token);
    expect(rows.map((r) => r.token_hash)).toContain(sha256(token));

    const { res, a } = await silent(browser, 'shop', SHOP);
    expect(res.status).toBe(303);
    const loc = new URL(res.headers.get('location')!);
    expect(loc.origin + loc.pathname).toBe(SHOP);
    const shop = await oidc.authorizationCodeGrant(rp.shop!, loc, {
      pkceCodeVerifier: a.verifier,
      expectedState: a.state,
      expectedNonce: a.nonce,
      idTokenExpected: true,
    });
    const c1 = first.tokens.claims()!;
    const c2 = shop.claims()!;
    expect(c2.sub).toBe(c1.sub);
    expect(c2.aud).toBe(`${projectId}.shop`);
    expect(c2.auth_time).toBe(c1.auth_time);
    expect(c2.sid).not.toBe(c1.sid);
    // Rotated: the browser holds a new value, and the old one no longer signs anyone in.
    const rotated = browser.cookies(new URL(base).host).get(cookieName())!;
    expect(rotated).not.toBe(token);
    const thief = new Browser();
    thief.cookies(new URL(base).host).set(cookieName(), token);
    expect((await silent(thief, 'shop', SHOP)).res.status).toBe(200);
  });

  test('a party without allowedOrigins gets no browser session: the page is shown, and its login sets no cookie', async () => {
    const browser = new Browser();
    await signUpAt(browser);
    const { res } = await silent(browser, 'legacy', LEGACY);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Legacy');
    const fresh = new Browser();
    const { post } = await signUpAt(fresh, 'legacy', LEGACY);
    expect(post.headers.getSetCookie().some((c) => c.startsWith(`${cookieName()}=`))).toBe(false);
  });

  test('prompt=login and max_age=0 show the page; prompt=none answers login_required without a session and a code with one', async () => {
    const browser = new Browser();
    await signUpAt(browser);
    expect((await silent(browser, 'shop', SHOP, { prompt: 'login' })).res.status).toBe(200);
    expect((await silent(browser, 'shop', SHOP, { max_age: '0' })).res.status).toBe(200);
    const none = await silent(browser, 'shop', SHOP, { prompt: 'none' });
    expect(none.res.status).toBe(303);
    expect(new URL(none.res.headers.get('location')!).searchParams.get('code')).toMatch(/^ac_/);
    const stranger = await silent(new Browser(), 'shop', SHOP, { prompt: 'none' });
    const loc = new URL(stranger.res.headers.get('location')!);
    expect(loc.searchParams.get('error')).toBe('login_required');
    expect(loc.searchParams.get('state')).toBe(stranger.a.state);
  });

  test('logout with id_token_hint ends the browser session and the hinted tokens and returns to a registered URI; without a hint it asks first', async () => {
    const browser = new Browser();
    const { tokens } = await signUpAt(browser);
    const bad = await browser.fetch(
      `${base}/auth/logout?${new URLSearchParams({ id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'https://evil.example/' })}`,
    );
    expect(bad.status).toBe(400);
    expect(bad.headers.get('location')).toBeNull();
    // A forged or foreign hint, or a client_id that is not the hint's, ends nothing.
    const [h, p, sig] = tokens.id_token!.split('.');
    const forgedHint = `${h}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), sub: 'cus_other' })).toString('base64url')}.${sig}`;
    for (const q of [
      { id_token_hint: forgedHint },
      { id_token_hint: 'garbage' },
      { id_token_hint: tokens.id_token!, client_id: `${projectId}.shop` },
    ] as Record<string, string>[]) {
      const res = await browser.fetch(
        `${base}/auth/logout?${new URLSearchParams({ ...q, post_logout_redirect_uri: WEB })}`,
      );
      expect({ q, status: res.status, location: res.headers.get('location') }).toEqual({
        q,
        status: 400,
        location: null,
      });
    }
    expect(browser.cookies(new URL(base).host).has(cookieName())).toBe(true);

    const url = oidc.buildEndSessionUrl(rp.web!, {
      id_token_hint: tokens.id_token!,
      post_logout_redirect_uri: WEB,
      state: 'bye',
    });
    expect(url.href.startsWith(`${base}/auth/logout?`)).toBe(true);
    const out = await browser.fetch(url);
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe(`${WEB}?state=bye`);
    expect(out.headers.getSetCookie().find((c) => c.startsWith(`${cookieName()}=`))).toContain('Max-Age=0');
    expect(browser.cookies(new URL(base).host).has(cookieName())).toBe(false);
    expect((await silent(browser, 'shop', SHOP)).res.status).toBe(200);
    await expect(oidc.refreshTokenGrant(rp.web!, tokens.refresh_token!)).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    const [row] = await server.svc
      .sql`select count(*)::int as n from auth_browser_sessions where project_id = ${projectId} and revoked_at is null and customer_id = ${tokens.claims()!.sub}`;
    expect(row!.n).toBe(0);

    // No hint: a confirmation page whose form (CSRF-protected) signs out.
    const other = new Browser();
    await signUpAt(other);
    const ask = await other.fetch(`${base}/auth/logout?client_id=${projectId}.web`);
    const page = await ask.text();
    expect(ask.status).toBe(200);
    expect(page).toContain('Sign out');
    const forged = await new Browser().fetch(`${base}/auth/logout`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: `${projectId}.web` }),
    });
    expect(forged.status).toBe(403);
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
    const done = await other.fetch(`${base}/auth/logout`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: `${projectId}.web`, csrf }),
    });
    expect(done.status).toBe(200);
    expect(other.cookies(new URL(base).host).has(cookieName())).toBe(false);
  });
});

describe('refresh and userinfo', () => {
  test('refresh_token returns a new ID token (same iss, sub, aud, auth_time; no nonce); another party cannot refresh it; userinfo answers by scope', async () => {
    const { tokens } = await signUpAt(new Browser());
    const before = tokens.claims()!;
    const refreshed = await oidc.refreshTokenGrant(rp.web!, tokens.refresh_token!);
    expect(refreshed.id_token).toBeString();
    const after = refreshed.claims()!;
    expect([after.iss, after.sub, after.aud, after.auth_time, after.sid]).toEqual([
      before.iss,
      before.sub,
      before.aud,
      before.auth_time,
      before.sid,
    ]);
    expect(after.nonce).toBeUndefined();
    expect(decodeJwt(refreshed.id_token!).iat).toBeGreaterThanOrEqual(before.iat);
    await expect(oidc.refreshTokenGrant(rp.shop!, refreshed.refresh_token!)).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    // The refused attempt by another party does not spend the token.
    const again = await oidc.refreshTokenGrant(rp.web!, refreshed.refresh_token!);
    expect(again.claims()!.sub).toBe(before.sub);

    const info = await oidc.fetchUserInfo(rp.web!, again.access_token, before.sub);
    expect(info.email).toBe(before.email as string);
    expect(info.name).toBe('Ada');
    // Browser apps read it from their party's origins only.
    const fromApp = await fetch(`${base}/customer/oauth/userinfo`, {
      headers: { authorization: `Bearer ${again.access_token}`, origin: 'https://app.example' },
    });
    expect(fromApp.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const fromShop = await fetch(`${base}/customer/oauth/userinfo`, {
      headers: { authorization: `Bearer ${again.access_token}`, origin: 'https://shop.example' },
    });
    expect(fromShop.status).toBe(200);
    expect(fromShop.headers.get('access-control-allow-origin')).toBeNull();
    const noToken = await fetch(`${base}/customer/oauth/userinfo`);
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get('www-authenticate')).toBe('Bearer');
    const badToken = await fetch(`${base}/customer/oauth/userinfo`, { headers: { authorization: 'Bearer nope' } });
    expect(badToken.status).toBe(401);
  });
});

describe('two processes on one database', () => {
  test('a login on one process, a second authorize in the same browser on the other: no prompt, and the code exchanges there', async () => {
    const peer = await spawnPeer(server, { SVC_BASE_URL: base });
    try {
      const browser = new Browser();
      const first = await signUpAt(browser);
      // Both processes stand behind one address; the browser sends its cookie to either.
      const peerHost = new URL(peer.apiUrl).host;
      browser.jar.set(peerHost, browser.cookies(new URL(base).host));
      const a = await authRequest(rp.shop!, SHOP);
      const res = await browser.fetch(a.url.href.replace(base, peer.apiUrl));
      expect(res.status).toBe(303);
      const loc = new URL(res.headers.get('location')!);
      const exchanged = await fetch(`${peer.apiUrl}/customer/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          client_id: `${projectId}.shop`,
          code: loc.searchParams.get('code')!,
          redirect_uri: SHOP,
          code_verifier: a.verifier,
        }),
      });
      expect(exchanged.status).toBe(200);
      const body = (await exchanged.json()) as { id_token: string };
      expect(decodeJwt(body.id_token).sub).toBe(first.tokens.claims()!.sub);
    } finally {
      await peer.stop();
    }
  });
});

describe('behind https (a TLS-terminating proxy in front of svc)', () => {
  test('the hosted page and the login set their cookies with Secure, HttpOnly and SameSite=Lax', async () => {
    const httpsServer = await startTestServer({ SVC_BASE_URL: 'https://login.example' });
    try {
      const p = await bootstrapProject(httpsServer, 'secure');
      const config = minimal(p, {
        relyingParties: [
          { clientId: 'web', name: 'Web', redirectUris: [WEB], allowedOrigins: ['https://app.example'] },
        ],
      });
      const r = await cli(httpsServer, p.ownerKey, 'push', '--dir', folder({ 'svc.config.json': config }), '--json');
      expect(r.code).toBe(0);
      // The proxy forwards plain http with the public Host.
      const local = new URL(httpsServer.apiUrl);
      const browser = new Browser({ 'login.example': local.host });
      const plainFetch = browser.fetch.bind(browser);
      browser.fetch = (url, init) =>
        plainFetch(String(url).replace(/^https:\/\/login\.example/, `http://login.example`), init);
      const verifier = oidc.randomPKCECodeVerifier();
      const url = new URL('https://login.example/auth/authorize');
      for (const [k, v] of Object.entries({
        client_id: `${p.projectId}.web`,
        redirect_uri: WEB,
        response_type: 'code',
        scope: 'openid email',
        state: 'st',
        nonce: 'nn',
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      }))
        url.searchParams.set(k, v);
      const page = await browser.fetch(url);
      expect(page.status).toBe(200);
      const html = await page.text();
      const csrf = page.headers.getSetCookie();
      expect(csrf.length).toBeGreaterThan(0);
      for (const c of csrf) expect(c).toMatch(/; HttpOnly; SameSite=Lax; Secure$/);
      const post = await browser.post(url, html, 'signup', { email: newEmail(), password: PASSWORD, name: 'Ada' });
      expect(post.status).toBe(303);
      expect(new URL(post.headers.get('location')!).origin + new URL(post.headers.get('location')!).pathname).toBe(WEB);
      const session = post.headers.getSetCookie().find((c) => c.startsWith(`svc_session_${p.projectId}=`))!;
      expect(session).toContain('HttpOnly');
      expect(session).toContain('SameSite=Lax');
      expect(session).toContain('Secure');
    } finally {
      await httpsServer.stop();
    }
  });
});
