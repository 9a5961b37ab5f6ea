import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import type { BrowserContext, Page } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrapProject, type TestServer, startTestServer } from '../support/server.ts';
import { addMember, controlAs, coverPng, firstSignIn, passwordSignIn, StudioBrowser } from './support.ts';
import { need } from '../support/binaries.ts';
import { testClip } from '../support/clip.ts';

/**
 * Headless Chromium and ffmpeg (the video field's clip), or undefined on a box without them (the
 * file's tests skip, one line says why).
 */
const CHROMIUM = need('chromium');
const FFMPEG = need('ffmpeg');

/**
 * The generated form with every field type of the spec, the record list's search, filters,
 * sort and pages, the locale switcher, unpublish, version history with its diff and restore,
 * keyboard use, labelled controls and both widths (1280 and 390 px), in headless Chromium.
 * Everything is checked through what the server stored (GraphQL with a secret key).
 */
const SHOTS = join(import.meta.dir, '../../docs/screenshots');

const MODELS = [
  { key: 'category', name: 'Category', fields: [{ key: 'name', type: 'text', required: true, queryable: true }] },
  { key: 'maker', name: 'Maker', fields: [{ key: 'name', type: 'text', required: true }] },
  {
    key: 'seo',
    name: 'SEO',
    fields: [
      { key: 'metaTitle', type: 'text', label: 'Meta title' },
      { key: 'index', type: 'boolean', label: 'Indexed' },
    ],
  },
  {
    key: 'product',
    name: 'Product',
    fields: [
      { key: 'name', type: 'text', required: true, queryable: true, label: 'Name' },
      { key: 'blurb', type: 'text', config: { widget: 'textarea' }, label: 'Blurb' },
      { key: 'description', type: 'richtext', label: 'Description' },
      { key: 'sections', type: 'flexible', label: 'Sections' },
      { key: 'price', type: 'number', queryable: true, label: 'Price' },
      { key: 'featured', type: 'boolean', queryable: true, label: 'Featured' },
      { key: 'launch', type: 'date', queryable: true, label: 'Launch' },
      {
        key: 'kind',
        type: 'enum',
        queryable: true,
        label: 'Kind',
        config: {
          options: [
            { value: 'tool', label: 'Tool' },
            { value: 'toy', label: 'Toy' },
          ],
        },
      },
      { key: 'category', type: 'select', label: 'Category', config: { optionModelKey: 'category' } },
      { key: 'maker', type: 'reference', label: 'Maker', config: { modelKey: 'maker' } },
      { key: 'seo', type: 'model', label: 'SEO', config: { modelKey: 'seo' } },
      { key: 'photo', type: 'image', label: 'Photo' },
      { key: 'clip', type: 'video', label: 'Clip' },
      { key: 'manual', type: 'file', label: 'Manual' },
      { key: 'tags', type: 'list', itemType: 'text', label: 'Tags' },
      { key: 'specs', type: 'json', label: 'Specs' },
    ],
  },
];

let server: TestServer;
let chrome: StudioBrowser;
let projectId: string;
let tenantId: string;
let ownerKey: string;
let reader: string;
let editorLink: string;
let categoryId: string;
let makerId: string;
let clip: Buffer;
let productId = '';
/** The control plane as the project's owner; throws with the answer on a non-2xx. */
const control = (method: string, path: string, body?: unknown): Promise<any> =>
  controlAs(server, ownerKey, method, path, body);

/** A draft or published read through the public API, as a client of the project sees it. */
async function read(query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const res = await fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': reader },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as any;
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

const draftOf = async (id: string, locale?: string) =>
  (
    await read('query($id: ID!, $l: String) { product(_id: $id, preview: true, locale: $l) { content } }', {
      id,
      l: locale ?? null,
    })
  ).product?.content;

const context = (width = 1280, height = 900): Promise<BrowserContext> => chrome.context(width, height);

let signedIn = false;
/** The editor's first sign-in redeems the link; later contexts sign in with the password. */
async function signIn(ctx: BrowserContext): Promise<Page> {
  if (signedIn) return passwordSignIn(ctx, server, 'forms@acme.test');
  const page = await firstSignIn(ctx, editorLink);
  signedIn = true;
  return page;
}

const url = (path: string) => `${server.apiUrl}/studio/p/${projectId}${path}`;

/** Controls without an accessible name (a label, aria-label(ledby), or a button's text). */
function unlabelled(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const doc = (globalThis as any).document;
    const named = (el: any) =>
      (el.labels?.length ?? 0) > 0 ||
      el.getAttribute('aria-label') ||
      (el.getAttribute('aria-labelledby') &&
        doc.getElementById(el.getAttribute('aria-labelledby'))?.textContent.trim()) ||
      el.title ||
      (el.tagName === 'BUTTON' && el.textContent.trim());
    return [...doc.querySelectorAll('input:not([type=hidden]), select, textarea, button, [contenteditable=true]')]
      .filter((el: any) => !named(el))
      .map((el: any) => el.outerHTML.slice(0, 160));
  });
}

/** Wider than the viewport: the page scrolls sideways (what "works at 390 px" rules out). */
const overflows = (page: Page) =>
  page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).innerWidth);

beforeAll(async () => {
  if (!CHROMIUM || !FFMPEG) return;
  mkdirSync(SHOTS, { recursive: true });
  server = await startTestServer();
  const b = await bootstrapProject(server, 'forms');
  projectId = b.projectId;
  tenantId = b.tenantId;
  ownerKey = b.ownerKey;
  await control('POST', `/projects/${projectId}/config`, {
    config: {
      key: 'forms',
      name: 'Forms',
      project: { id: projectId, tenantId, settings: { locales: ['en', 'de'] } },
      models: MODELS,
    },
  }).then((r) => {
    if (r.errors?.length) throw new Error(JSON.stringify(r.errors));
  });
  reader = (
    await control('POST', '/api-keys', {
      name: 'reader',
      type: 'secret',
      project: projectId,
      scopes: ['records:read', 'drafts:read'],
    })
  ).key;
  categoryId = (
    await control('POST', `/projects/${projectId}/records`, {
      model: 'category',
      naturalKey: 'tools',
      data: { name: 'Garden tools' },
    })
  )._id;
  makerId = (
    await control('POST', `/projects/${projectId}/records`, {
      model: 'maker',
      naturalKey: 'acme',
      data: { name: 'Acme Works' },
    })
  )._id;
  editorLink = await addMember(server, ownerKey, 'forms@acme.test', 'editor', projectId);
  clip = await testClip(FFMPEG, 'duration=1:size=160x90:rate=10');
  chrome = await StudioBrowser.launch(CHROMIUM);
}, 60_000);

afterEach(() => chrome?.closeContexts());

afterAll(async () => {
  await chrome?.close();
  await server?.stop();
});

describe.skipIf(!CHROMIUM || !FFMPEG)('the generated form', () => {
  test('every field type is filled in through its widget, with the keyboard where it matters, and stored as typed', async () => {
    const ctx = await context();
    const page = await signIn(ctx);
    await page.goto(url('/m/product'));
    await page.getByRole('heading', { name: 'Product' }).waitFor();
    // Keyboard: Tab reaches "New Product" and Enter opens the form.
    let focused = '';
    for (let i = 0; i < 60 && focused !== 'New Product'; i++) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate(() => (globalThis as any).document.activeElement?.textContent?.trim() ?? '');
    }
    expect(focused).toBe('New Product');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'New Product' }).waitFor();

    await page.getByLabel('Name').fill('Spade');
    await page.getByLabel('Blurb').fill('Digs well');
    await page.getByRole('textbox', { name: 'Description' }).click();
    await page.keyboard.type('Forged steel');
    await page.getByRole('button', { name: 'Add Sections block' }).click();
    await page.getByLabel('Sections block 1: paragraph (JSON)').fill('{"text": "First block"}');
    // Typed key by key, as a user does: "12." on the way must not lose its point.
    await page.getByLabel('Price').pressSequentially('12.5');
    // A checkbox toggled with the space bar.
    await page.getByLabel('Featured').focus();
    await page.keyboard.press('Space');
    await page.getByLabel('Launch').fill('2026-05-01T10:30');
    await page.getByLabel('Kind').selectOption('toy');
    // Pickers list the option model's and the referenced model's records by title.
    await page.getByLabel('Category').locator('option', { hasText: 'Garden tools' }).waitFor({ state: 'attached' });
    await page.getByLabel('Category').selectOption({ label: 'Garden tools' });
    await page.getByLabel('Maker').locator('option', { hasText: 'Acme Works' }).waitFor({ state: 'attached' });
    await page.getByLabel('Maker').selectOption({ label: 'Acme Works' });
    await page.getByLabel('Meta title').fill('Buy a spade');
    await page.getByLabel('Indexed').check();
    await page
      .getByLabel('Upload Photo')
      .setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: await coverPng() });
    await page.locator('[data-field="photo"] img.preview').waitFor();
    await page.getByLabel('Alt text').fill('A spade');
    await page.getByLabel('Upload Clip').setInputFiles({ name: 'clip.mp4', mimeType: 'video/mp4', buffer: clip });
    await page.locator('[data-field="clip"] video.preview').waitFor();
    await page
      .getByLabel('Upload Manual')
      .setInputFiles({ name: 'manual.txt', mimeType: 'text/plain', buffer: Buffer.from('Hold the handle.\n') });
    await page.locator('[data-field="manual"] a', { hasText: 'manual.txt' }).waitFor();
    await page.getByRole('button', { name: 'Add item' }).click();
    await page.getByLabel('Tags item 1').fill('garden');
    await page.getByRole('button', { name: 'Add item' }).click();
    await page.getByLabel('Tags item 2').fill('steel');
    // Reordering a list with its buttons.
    await page.locator('[data-field="tags"] li').nth(1).getByRole('button', { name: 'Move up' }).click();
    await page.getByLabel('Specs').fill('{"weight": 1.2, "colors": ["red"]}');

    expect(await unlabelled(page)).toEqual([]);
    expect(await overflows(page)).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(SHOTS, 'record-form.png'), fullPage: true });
    await page.getByRole('button', { name: 'Create' }).click();
    // The editor opens, or the form says why not (shown in the failure).
    await page.getByRole('button', { name: 'Publish', exact: true }).or(page.getByRole('alert')).first().waitFor();
    expect(await page.getByRole('alert').allTextContents()).toEqual([]);
    productId = page.url().split('/r/')[1]!;

    const c = await draftOf(productId);
    // The uploaded file is served (read before toMatchObject, which is given asymmetric matchers).
    expect((await fetch(String(c.manual.url))).status).toBe(200);
    expect(c).toMatchObject({
      name: 'Spade',
      blurb: 'Digs well',
      description: expect.stringContaining('Forged steel'),
      sections: [{ type: 'paragraph', data: { text: 'First block' } }],
      price: 12.5,
      featured: true,
      kind: 'toy',
      category: categoryId,
      maker: makerId,
      seo: { metaTitle: 'Buy a spade', index: true },
      photo: { alt: 'A spade', mimeType: 'image/png', url: expect.stringContaining('/api/files/') },
      clip: { mimeType: 'video/mp4', url: expect.stringContaining('/api/files/') },
      manual: { name: 'manual.txt', url: expect.stringContaining('/api/files/') },
      tags: ['steel', 'garden'],
      specs: { weight: 1.2, colors: ['red'] },
    });
    // The local time typed into the date field is stored as that instant.
    const offset = await page.evaluate(() => new Date('2026-05-01T10:30').toISOString());
    expect(c.launch).toBe(offset);

    // The editor shows what was stored, every widget in the room.
    await page.getByLabel('Name').waitFor();
    expect(await page.getByLabel('Price').inputValue()).toBe('12.5');
    expect(await page.getByLabel('Kind').inputValue()).toBe('toy');
    expect(await page.getByLabel('Featured').isChecked()).toBe(true);
    expect(await page.getByLabel('Meta title').inputValue()).toBe('Buy a spade');
    expect(await page.getByLabel('Tags item 1').inputValue()).toBe('steel');
    expect(await unlabelled(page)).toEqual([]);
  }, 120_000);

  test('publish, unpublish, locales, and version history with a diff and restore', async () => {
    expect(productId).not.toBe('');
    const ctx = await context();
    const page = await signIn(ctx);
    await page.goto(url(`/m/product/r/${productId}`));
    const name = page.getByLabel('Name');
    await name.waitFor();
    await page.getByRole('button', { name: 'Publish', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Published' }).waitFor();
    const published = async () =>
      (await read('query($id: ID!) { product(_id: $id) { content } }', { id: productId })).product;
    expect((await published()).content.name).toBe('Spade');

    await page.getByRole('button', { name: 'Unpublish' }).click();
    await page.getByRole('status').filter({ hasText: 'Unpublished' }).waitFor();
    await page.locator('.bar .badge.draft').waitFor();
    expect(await published()).toBeNull();
    await expect(page.getByRole('button', { name: 'Unpublish' }).count()).resolves.toBe(0);

    // An edit saved as a draft makes a second version.
    await name.fill('Spade XL');
    await page.getByRole('button', { name: 'Save draft' }).click();
    await page.getByRole('status').filter({ hasText: 'Draft saved' }).waitFor();
    expect((await draftOf(productId)).name).toBe('Spade XL');

    // The German locale: its own room; what is saved there leaves the default locale alone.
    await page.getByLabel('Locale').selectOption('de');
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#f-name')?.value === 'Spade XL');
    await name.fill('Spaten');
    await page.getByRole('button', { name: 'Save draft' }).click();
    await page.getByRole('status').filter({ hasText: 'Draft saved' }).waitFor();
    expect((await draftOf(productId, 'de')).name).toBe('Spaten');
    expect((await draftOf(productId, 'en')).name).toBe('Spade XL');
    await page.getByLabel('Locale').selectOption('');
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#f-name')?.value === 'Spade XL');

    // History: the first version against the current draft, then restored.
    await page.getByRole('tab', { name: 'History' }).click();
    const first = page.getByRole('list', { name: 'Versions' }).getByRole('button', { name: /^v1 · create/ });
    await first.click();
    // Who wrote each version: the member's email, never a bare member id.
    const versions = await page.getByRole('list', { name: 'Versions' }).innerText();
    expect(versions).toContain('forms@acme.test');
    expect(versions).not.toContain('mem_');
    const row = page.locator('.diff tr.changed', { has: page.getByRole('rowheader', { name: 'Name' }) });
    await row.waitFor();
    expect(await row.locator('del').textContent()).toBe('Spade');
    expect(await row.locator('ins').textContent()).toBe('Spade XL');
    await expect(
      page.locator('.diff tr.same', { has: page.getByRole('rowheader', { name: 'Price' }) }).count(),
    ).resolves.toBe(1);
    await page.screenshot({ path: join(SHOTS, 'history-diff.png') });
    await page.getByRole('button', { name: 'Restore this version' }).click();
    const end = Date.now() + 20_000;
    while ((await draftOf(productId)).name !== 'Spade' && Date.now() < end) await Bun.sleep(100);
    expect(await draftOf(productId)).toMatchObject({
      name: 'Spade',
      price: 12.5,
      kind: 'toy',
      tags: ['steel', 'garden'],
    });
    // The open room takes the restored content in.
    await page.getByRole('tab', { name: 'Content' }).click();
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#f-name')?.value === 'Spade');
  }, 120_000);
});

describe.skipIf(!CHROMIUM || !FFMPEG)('the record list', () => {
  test('search, filters, sort and pages; the editor works at 390 px', async () => {
    // 25 more products over the control API, every third featured, all published.
    const rakes: string[] = [];
    for (let i = 1; i <= 25; i++) {
      const r = await control('POST', `/projects/${projectId}/records`, {
        model: 'product',
        naturalKey: `p-${i}`,
        data: { name: `Rake ${String(i).padStart(2, '0')}${i === 7 ? ' zebra' : ''}`, price: i, featured: i % 3 === 0 },
      });
      await control('POST', `/projects/${projectId}/records/${r._id}/publish`, { model: 'product' });
      rakes.push(r._id);
    }
    // Counts as the API gives them (the product made by the form test is one of them when it ran).
    const count = async (where: unknown) =>
      (
        await read('query($w: ProductWhere) { products(first: 1, preview: true, where: $w) { totalCount } }', {
          w: where,
        })
      ).products.totalCount as number;
    const all = await count(null);
    const featured = await count({ featured: { eq: true } });
    expect(all).toBeGreaterThanOrEqual(25);
    const records = (n: number) => new RegExp(`^${n} records?$`);
    const ctx = await context();
    const page = await signIn(ctx);
    await page.goto(url('/m/product'));
    const caption = page.locator('table.records caption');
    await caption.filter({ hasText: records(all) }).waitFor();
    const rows = page.locator('table.records tbody tr');
    expect(await rows.count()).toBe(20);
    await page.getByRole('button', { name: 'Next →' }).click();
    await page.getByText('Page 2').waitFor();
    await rows.nth(all - 20).waitFor({ state: 'detached' });
    expect(await rows.count()).toBe(all - 20);
    await page.getByRole('button', { name: '← Previous' }).click();
    await page.getByText('Page 1').waitFor();

    const search = page.getByRole('search');
    await search.getByLabel('Featured').selectOption('true');
    await caption.filter({ hasText: records(featured) }).waitFor();
    await search.getByLabel('Sort').selectOption('-price');
    await rows.first().filter({ hasText: 'Rake 24' }).waitFor();
    await search.getByLabel('Sort').selectOption('price');
    await rows.first().filter({ hasText: 'Rake 03' }).waitFor();
    await search.getByLabel('Price').fill('9');
    await search.getByLabel('Price').press('Tab');
    await caption.filter({ hasText: /^1 record$/ }).waitFor();
    expect(await rows.first().textContent()).toContain('Rake 09');
    await search.getByLabel('Featured').selectOption('');
    await search.getByLabel('Price').fill('');
    await search.getByLabel('Price').press('Tab');
    await caption.filter({ hasText: records(all) }).waitFor();

    // Full-text search (published content), submitted with Enter.
    await search.getByLabel('Search').fill('zebra');
    await search.getByLabel('Search').press('Enter');
    await caption.filter({ hasText: '1 record matching “zebra”' }).waitFor();
    expect(await rows.first().textContent()).toContain('Rake 07 zebra');
    expect(await unlabelled(page)).toEqual([]);
    expect(await overflows(page)).toBeLessThanOrEqual(0);

    // A phone: the list and the full form fit the width; nothing scrolls sideways.
    const phone = await context(390, 844);
    // Every script this fresh browser fetches on its way to a record editor, as sent (compressed).
    const scripts: Promise<number>[] = [];
    phone.on('response', (r) => {
      if (r.request().resourceType() === 'script')
        scripts.push(
          r
            .request()
            .sizes()
            .then((x) => x.responseBodySize),
        );
    });
    const small = await signIn(phone);
    await small.goto(url('/m/product'));
    await small.locator('table.records tbody tr').first().waitFor();
    expect(await overflows(small)).toBeLessThanOrEqual(0);
    // The form test's product (with its image and video previews) when it ran.
    await small.goto(url(`/m/product/r/${productId || rakes[0]}`));
    await small.getByLabel('Name').waitFor();
    if (productId) await small.locator('[data-field="photo"] img.preview').waitFor();
    await small.getByRole('textbox', { name: 'Description' }).waitFor();
    expect(await overflows(small)).toBeLessThanOrEqual(0);
    const kb = (await Promise.all(scripts)).reduce((n, x) => n + x, 0) / 1024;
    console.log(`studio sign-in → list → record editor: ${scripts.length} scripts, ${kb.toFixed(1)} KB as transferred`);
    expect(kb).toBeLessThan(300);
    await small.getByRole('tab', { name: 'History' }).click();
    await small.getByRole('list', { name: 'Versions' }).getByRole('button').first().click();
    await small.locator('.diff table').waitFor();
    expect(await overflows(small)).toBeLessThanOrEqual(0);
  }, 120_000);

  test('no console errors on the way', () => {
    expect(chrome.consoleErrors).toEqual([]);
  });
});
