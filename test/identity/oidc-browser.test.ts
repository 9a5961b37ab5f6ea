import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import * as oidc from 'openid-client';
import { chromium, type Browser } from 'playwright-core';
import { join } from 'node:path';
import { bootstrapProject, startTestServer, type TestServer } from '../support/server.ts';
import { pushMinimal } from '../config/support.ts';
import { freePort } from '../../src/store/ports.ts';
import { PASSWORD } from './oidc-support.ts';
import { need } from '../support/binaries.ts';

setDefaultTimeout(120_000);

/** Headless Chromium, or undefined on a box without it (the file's tests skip, one line says why). */
const CHROMIUM = need('chromium');

/**
 * The hosted login in a real browser (Debian's chromium, headless, JavaScript off): a relying
 * party app using openid-client sends the browser to the page, the customer signs up, and the
 * app receives and exchanges the code. The page is saved as docs/screenshots/hosted-login.png so
 * a person can see what a customer sees.
 */
const SCREENSHOT = join(import.meta.dir, '../../docs/screenshots/hosted-login.png');
let server: TestServer;
let base: string;
let app: ReturnType<typeof Bun.serve>;
let appBase: string;
let browser: Browser;

beforeAll(async () => {
  if (!CHROMIUM) return;
  const [port, appPort] = [await freePort(), await freePort()];
  base = `http://127.0.0.1:${port}`;
  appBase = `http://127.0.0.1:${appPort}`;
  server = await startTestServer({ PORT: String(port), SVC_BASE_URL: base });
  const p = await bootstrapProject(server, 'browser');
  const r = await pushMinimal(server, p, {
    project: {
      id: p.projectId,
      tenantId: p.tenantId,
      settings: { displayName: 'Acme Outfitters', primaryColor: '#0b6e4f', customerOtpEnabled: true },
    },
    authProviders: [
      {
        key: 'google',
        name: 'Google',
        type: 'oauth2',
        isDefault: true,
        config: { issuer: 'https://accounts.google.com', clientId: 'acme-store' },
      },
    ],
    relyingParties: [
      {
        clientId: 'store',
        name: 'Acme Store',
        redirectUris: [`${appBase}/cb`],
        allowedScopes: ['openid', 'email', 'profile'],
      },
    ],
  });
  if (r.code !== 0) throw new Error(r.out + r.err);
  const config = await oidc.discovery(
    new URL(`${base}/customer`),
    `${p.projectId}.store`,
    { id_token_signed_response_alg: 'EdDSA' },
    oidc.None(),
    { execute: [oidc.allowInsecureRequests] },
  );

  // The relying party: a small web app that signs its users in with openid-client.
  const pending = new Map<string, { verifier: string; nonce: string }>();
  app = Bun.serve({
    port: appPort,
    hostname: '127.0.0.1',
    async fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === '/login') {
        const verifier = oidc.randomPKCECodeVerifier();
        const state = oidc.randomState();
        const nonce = oidc.randomNonce();
        pending.set(state, { verifier, nonce });
        const to = oidc.buildAuthorizationUrl(config, {
          redirect_uri: `${appBase}/cb`,
          scope: 'openid email profile',
          state,
          nonce,
          code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
          code_challenge_method: 'S256',
        });
        return Response.redirect(to.href, 302);
      }
      if (url.pathname === '/cb') {
        const state = url.searchParams.get('state') ?? '';
        const p = pending.get(state);
        if (!p) return new Response('unknown state', { status: 400 });
        pending.delete(state);
        const tokens = await oidc.authorizationCodeGrant(config, url, {
          pkceCodeVerifier: p.verifier,
          expectedState: state,
          expectedNonce: p.nonce,
          idTokenExpected: true,
        });
        const c = tokens.claims()!;
        return new Response(
          `<!doctype html><title>Store</title><h1 id="who">Signed in as ${c.email}</h1><p id="sub">${c.sub}</p>`,
          { headers: { 'content-type': 'text/html' } },
        );
      }
      if (url.pathname === '/framed') {
        return new Response(
          `<!doctype html><title>framing</title><iframe id="f" src="${base}/auth/authorize?client_id=${p.projectId}.store"></iframe>`,
          { headers: { 'content-type': 'text/html' } },
        );
      }
      return new Response('not found', { status: 404 });
    },
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  app?.stop(true);
  await server?.stop();
});

describe.skipIf(!CHROMIUM)('the hosted login in headless Chromium', () => {
  test('with JavaScript off: the app sends the browser to the branded page (screenshot saved), the customer signs up, the app gets tokens', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 520, height: 1100 } });
    const page = await context.newPage();
    await page.goto(`${appBase}/login`);
    expect(page.url().startsWith(`${base}/auth/authorize?`)).toBe(true);
    expect(await page.title()).toBe('Acme Outfitters: sign in to Acme Store');
    expect(await page.locator('h1').innerText()).toBe('Acme Outfitters');
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(await page.getByRole('button', { name: 'Continue with Google' }).count()).toBe(1);
    // Every field is reachable by its label.
    for (const label of ['Email', 'Password', 'Name (optional)', 'Password (at least 8 characters)']) {
      expect(await page.getByLabel(label, { exact: true }).count()).toBeGreaterThan(0);
    }
    const email = `chromium${Date.now()}@example.com`;
    await page.locator('#su-email').fill(email);
    await page.getByLabel('Name (optional)').fill('Chromium Customer');
    await page.getByLabel('Password (at least 8 characters)').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${appBase}/cb?**`);
    expect(await page.locator('#who').innerText()).toBe(`Signed in as ${email}`);
    await context.close();
  });

  test('the keyboard reaches the sign-in fields in reading order, and the page refuses to be framed', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${appBase}/login`);
    const order: string[] = [];
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press('Tab');
      order.push(
        await page
          .locator(':focus')
          .evaluate((el: { id: string; textContent: string | null }) => el.id || el.textContent || ''),
      );
    }
    const pw = order.indexOf('pw-email');
    expect(pw).toBeGreaterThanOrEqual(0);
    expect(order[pw + 1]).toBe('pw-password');
    expect(order[pw + 2]).toBe('Sign in');

    const framed = await context.newPage();
    await framed.goto(`${appBase}/framed`);
    // goto waits for the load event, which waits for the frame to load or fail. Blocked by
    // frame-ancestors 'none', the frame shows Chromium's error page, never the login form.
    const frame = framed.frames().find((f) => f !== framed.mainFrame())!;
    expect(frame.url()).toStartWith('chrome-error://');
    expect(await frame.locator('form').count()).toBe(0);
    await context.close();
  });
});
