import sharp from 'sharp';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { bootstrapProject, cli, type TestServer } from '../support/server.ts';

/** The Studio tests' project: a versioned article (every common field kind) and a category list. */
export const STUDIO_MODELS = [
  {
    key: 'category',
    name: 'Category',
    fields: [{ key: 'name', type: 'text', required: true, queryable: true }],
  },
  {
    key: 'article',
    name: 'Article',
    fields: [
      { key: 'title', type: 'text', required: true, queryable: true, label: 'Title' },
      { key: 'summary', type: 'text', config: { widget: 'textarea' }, label: 'Summary' },
      { key: 'body', type: 'richtext', label: 'Body' },
      { key: 'cover', type: 'image', label: 'Cover' },
      { key: 'rating', type: 'number', queryable: true, label: 'Rating' },
      { key: 'featured', type: 'boolean', queryable: true, label: 'Featured' },
      {
        key: 'status',
        type: 'enum',
        queryable: true,
        label: 'Status',
        config: {
          options: [
            { value: 'idea', label: 'Idea' },
            { value: 'ready', label: 'Ready' },
          ],
          default: 'idea',
        },
      },
      { key: 'category', type: 'select', label: 'Category', config: { optionModelKey: 'category' } },
      { key: 'tags', type: 'list', itemType: 'text', label: 'Tags' },
      { key: 'extra', type: 'json', label: 'Extra' },
    ],
  },
];

export interface StudioProject {
  tenantId: string;
  projectId: string;
  ownerKey: string;
  publicKey: string;
}

export async function studioProject(server: TestServer): Promise<StudioProject> {
  const { tenantId, projectId, ownerKey } = await bootstrapProject(server, 'studio');
  const auth = { authorization: `Bearer ${ownerKey}`, 'content-type': 'application/json' };
  const push = await fetch(`${server.apiUrl}/v1/control/projects/${projectId}/config`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({
      config: {
        key: 'studio',
        name: 'Studio test',
        models: STUDIO_MODELS,
        placements: [
          { type: 'main-editor', url: `${server.apiUrl}/health`, modelKeys: ['article'], tabName: 'Preview' },
        ],
      },
    }),
  });
  const pushed = (await push.json()) as { errors?: unknown[] };
  if (!push.ok || pushed.errors?.length) throw new Error(`push failed: ${push.status} ${JSON.stringify(pushed)}`);
  const key = await fetch(`${server.apiUrl}/v1/control/api-keys`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'web', type: 'public', project: projectId, scopes: ['records:read'] }),
  });
  const { key: publicKey } = (await key.json()) as { key: string };
  return { tenantId, projectId, ownerKey, publicKey };
}

/** `svc members add` as the owner; returns the first-login link it prints. */
export async function addMember(
  server: TestServer,
  ownerKey: string,
  email: string,
  role: string,
  projectId?: string,
): Promise<string> {
  const r = await cli(
    server,
    ownerKey,
    'members',
    'add',
    '--email',
    email,
    '--role',
    role,
    ...(projectId ? ['--project', projectId] : []),
    '--json',
  );
  if (r.code !== 0) throw new Error(r.err);
  return r.json.loginUrl as string;
}

/** A control-plane call with an owner's control key; throws with the answer on a non-2xx. */
export async function controlAs(
  server: TestServer,
  ownerKey: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<any> {
  const res = await fetch(`${server.apiUrl}/v1/control${path}`, {
    method,
    headers: { authorization: `Bearer ${ownerKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

/**
 * A project of its own for an e2e file: bootstrapped as `key`, then `config` pushed through the
 * control plane as the config `key`/`name` pinned to it (each file's `beforeAll` did the same).
 * Throws with the push's errors.
 */
export async function pushedProject(
  server: TestServer,
  key: string,
  name: string,
  config: Record<string, unknown>,
): Promise<{ tenantId: string; projectId: string; ownerKey: string }> {
  const b = await bootstrapProject(server, key);
  const pushed = await controlAs(server, b.ownerKey, 'POST', `/projects/${b.projectId}/config`, {
    config: { key, name, project: { id: b.projectId, tenantId: b.tenantId }, ...config },
  });
  if (pushed.errors?.length) throw new Error(JSON.stringify(pushed.errors));
  return b;
}

export const PASSWORD = 'correct horse battery staple';

/** Redeems a first-login link over HTTP; returns the session cookie and the CSRF token. */
export async function welcome(
  server: { apiUrl: string },
  loginUrl: string,
  password = PASSWORD,
): Promise<{ cookie: string; csrf: string }> {
  const token = new URL(loginUrl).hash.replace('#token=', '');
  const res = await fetch(`${server.apiUrl}/studio/api/welcome`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, password }),
  });
  if (!res.ok) throw new Error(`welcome failed: ${res.status} ${await res.text()}`);
  const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  return { cookie, csrf: ((await res.json()) as { csrf: string }).csrf };
}

/** A 480×270 PNG cover (a blue-to-teal gradient, drawn with sharp). */
export async function coverPng(): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="480" height="270"><defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#1f5fbf"/><stop offset="1" stop-color="#15aabf"/></linearGradient></defs><rect width="480" height="270" fill="url(#g)"/><circle cx="360" cy="90" r="46" fill="#ffd43b"/></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/** Flags for Debian's headless Chromium (no sandbox as root, nothing fetched from outside). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
];

/**
 * Headless Chromium for the Studio's browser tests: collects console errors of every page, and
 * closes the contexts a test opened after it, failed or not — a context left open keeps its
 * editor in a room, and the next test sees an extra avatar.
 */
export class StudioBrowser {
  readonly consoleErrors: string[] = [];
  private readonly open = new Set<BrowserContext>();

  private constructor(readonly browser: Browser) {}

  /** `executablePath`: from `need('chromium')` (test/support/binaries.ts), which the test file skips on. */
  static async launch(executablePath: string): Promise<StudioBrowser> {
    return new StudioBrowser(await chromium.launch({ executablePath, args: CHROMIUM_ARGS }));
  }

  async context(width: number, height: number): Promise<BrowserContext> {
    const ctx = await this.browser.newContext({ viewport: { width, height } });
    this.open.add(ctx);
    // Console errors and uncaught exceptions both count: a TypeError thrown in an event handler or
    // a timer is a pageerror, which never reaches the console listener.
    ctx.on('page', (p) => {
      p.on('console', (m) => {
        if (m.type() === 'error') this.consoleErrors.push(m.text().slice(0, 300));
      });
      p.on('pageerror', (e) => this.consoleErrors.push(`${e.name}: ${e.message}`.slice(0, 300)));
    });
    return ctx;
  }

  async closeContexts(): Promise<void> {
    await Promise.all([...this.open].map((c) => c.close().catch(() => {})));
    this.open.clear();
  }

  async close(): Promise<void> {
    await this.closeContexts();
    await this.browser.close();
  }
}

/** Signs in through a first-login link (the one `svc members add` printed) in a new page of `ctx`. */
export async function firstSignIn(ctx: BrowserContext, link: string): Promise<Page> {
  const page = await ctx.newPage();
  await page.goto(link);
  await page.getByLabel('New password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await page.getByRole('heading', { name: 'Projects' }).waitFor();
  return page;
}

/** Signs in on the Studio's login page with `email` and PASSWORD, in a new page of `ctx`. */
export async function passwordSignIn(ctx: BrowserContext, server: { apiUrl: string }, email: string): Promise<Page> {
  const page = await ctx.newPage();
  await page.goto(`${server.apiUrl}/studio/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Projects' }).waitFor();
  return page;
}

/**
 * The browser half of an e2e file's `beforeAll`: adds `member` to the project, launches
 * Chromium and signs the member in through their first-login link, in one context of
 * `width`×`height`; the page shows the Studio's project list.
 */
export async function signedInBrowser(
  executablePath: string,
  server: TestServer,
  ownerKey: string,
  member: { email: string; role: string; projectId: string },
  [width, height]: [number, number],
): Promise<{ chrome: StudioBrowser; ctx: BrowserContext; page: Page }> {
  const link = await addMember(server, ownerKey, member.email, member.role, member.projectId);
  const chrome = await StudioBrowser.launch(executablePath);
  const ctx = await chrome.context(width, height);
  return { chrome, ctx, page: await firstSignIn(ctx, link) };
}
