import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import type { BrowserContext, Page } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import {
  addMember,
  coverPng,
  firstSignIn,
  passwordSignIn,
  studioProject,
  type StudioProject,
  StudioBrowser,
} from './support.ts';
import { need } from '../support/binaries.ts';

/** Headless Chromium, or undefined on a box without it (the file's tests skip, one line says why). */
const CHROMIUM = need('chromium');

/**
 * The Studio end to end in headless Chromium (the Debian package): a member's first sign-in,
 * a record made through the generated form with an uploaded image, published and read back
 * through the public GraphQL API; two browsers editing one record; a viewer who cannot edit.
 * Screenshots of the main screens go to docs/screenshots/ (linked from the README).
 */
const SHOTS = join(import.meta.dir, '../../docs/screenshots');

let server: TestServer;
let project: StudioProject;
let chrome: StudioBrowser;
let editorLink: string;
let secondLink: string;
let viewerLink: string;
let recordId = '';
/** GraphiQL's bundle is built on first use; start it early, beside the other tests. */
let explorerBuilt: Promise<unknown>;

const context = (width = 1280, height = 860): Promise<BrowserContext> => chrome.context(width, height);

const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`) });

beforeAll(async () => {
  if (!CHROMIUM) return;
  mkdirSync(SHOTS, { recursive: true });
  server = await startTestServer();
  project = await studioProject(server);
  editorLink = await addMember(server, project.ownerKey, 'ed@acme.test', 'editor', project.projectId);
  secondLink = await addMember(server, project.ownerKey, 'al@acme.test', 'admin', project.projectId);
  viewerLink = await addMember(server, project.ownerKey, 'vi@acme.test', 'viewer', project.projectId);
  explorerBuilt = fetch(`${server.apiUrl}/studio/explorer/manifest.json`).then((r) => r.json());
  chrome = await StudioBrowser.launch(CHROMIUM);
}, 60_000);

afterEach(() => chrome?.closeContexts());

afterAll(async () => {
  await chrome?.close();
  await server?.stop();
});

describe.skipIf(!CHROMIUM)('the Studio in a browser', () => {
  test('an editor signs in, creates a record with an image through the form, publishes it, and the public API serves it', async () => {
    const ctx = await context();
    const signIn = await ctx.newPage();
    await signIn.goto(`${server.apiUrl}/studio/`);
    await signIn.getByRole('heading', { name: 'Sign in to the svc Studio' }).waitFor();
    await shot(signIn, 'sign-in');
    await signIn.close();

    const page = await firstSignIn(ctx, editorLink);
    await page
      .getByRole('link', { name: /studio/ })
      .first()
      .click();
    await page.getByRole('navigation', { name: 'Project' }).getByRole('link', { name: 'Article' }).click();
    await page.getByRole('button', { name: 'New Article' }).click();
    await page.getByLabel('Title').fill('Hello from the Studio');
    await page.getByLabel('Summary').fill('Made in a browser');
    await page.getByLabel('Rating').fill('4');
    await page.getByRole('textbox', { name: 'Body' }).click();
    await page.keyboard.type('Rich text body');
    await page
      .getByLabel('Upload Cover')
      .setInputFiles({ name: 'cover.png', mimeType: 'image/png', buffer: await coverPng() });
    await page.locator('img.preview').waitFor();
    await page.getByRole('button', { name: 'Create' }).click();

    // The record's editor: it joins the room, then publishing saves the draft and publishes it.
    await page.getByRole('button', { name: 'Publish', exact: true }).waitFor();
    recordId = page.url().split('/r/')[1]!;
    expect(recordId).toMatch(/\S/);
    await page.getByLabel('Title').waitFor();
    await expect(page.getByLabel('Title').inputValue()).resolves.toBe('Hello from the Studio');
    await shot(page, 'record-editor');
    await page.getByRole('button', { name: 'Publish', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Published' }).waitFor();
    await page.locator('.badge.published').waitFor();

    const res = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': project.publicKey },
      body: JSON.stringify({ query: '{ articles(first: 5) { edges { node { _id content } } } }' }),
    });
    const body = (await res.json()) as any;
    const node = body.data.articles.edges[0].node;
    expect(node._id).toBe(recordId);
    expect(node.content.title).toBe('Hello from the Studio');
    expect(node.content.body).toContain('Rich text body');
    expect(node.content.rating).toBe(4);
    expect(node.content.status).toBe('idea');
    expect(node.content.cover.url).toContain('/api/files/');
    expect((await fetch(node.content.cover.url)).headers.get('content-type')).toBe('image/png');

    await page.getByRole('navigation', { name: 'Project' }).getByRole('link', { name: 'Article' }).click();
    await page.getByRole('link', { name: 'Hello from the Studio' }).waitFor();
    // The list follows changes:article on the gateway: a record written elsewhere appears.
    await page.getByRole('status').filter({ hasText: 'live' }).waitFor();
    const saved = await fetch(`${server.apiUrl}/v1/control/projects/${project.projectId}/records`, {
      method: 'POST',
      headers: { authorization: `Bearer ${project.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'article',
        naturalKey: 'from-the-cli',
        data: { title: 'Arrived while watching', rating: 5 },
      }),
    });
    expect(saved.status).toBe(200);
    await page.getByRole('link', { name: 'Arrived while watching' }).waitFor({ timeout: 15_000 });
    await shot(page, 'record-list');
    await ctx.close();
  }, 90_000);

  test('two browsers typing into one record converge and see each other', async () => {
    const a = await context();
    const b = await context();
    const pa = await firstSignIn(a, secondLink);
    // The editor's link was used by the first test: they sign in with their password now.
    const pb = await passwordSignIn(b, server, 'ed@acme.test');
    const url = `${server.apiUrl}/studio/p/${project.projectId}/m/article/r/${recordId}`;
    await Promise.all([pa.goto(url), pb.goto(url)]);
    const ta = pa.getByLabel('Summary');
    const tb = pb.getByLabel('Summary');
    await ta.waitFor();
    await tb.waitFor();
    // Each sees the other's avatar (awareness).
    await pa.locator('.avatars li[aria-label="ed@acme.test"]').waitFor();
    await pb.locator('.avatars li[aria-label="al@acme.test"]').waitFor();
    await ta.click();
    await pa.keyboard.press('End');
    await tb.click();
    await pb.keyboard.press('Home');
    await Promise.all([pa.keyboard.type(' [from A]', { delay: 15 }), pb.keyboard.type('[from B] ', { delay: 15 })]);
    const want = '[from B] Made in a browser [from A]';
    // Both pages end with the same text, both insertions in it.
    // The text of an element, leaving out other editors' cursor labels (y-prosemirror widgets).
    const converged = ([sel, prop, w]: string[]) => {
      const el = (globalThis as any).document.querySelector(sel)?.cloneNode(true);
      for (const c of el?.querySelectorAll('.ProseMirror-yjs-cursor') ?? []) c.remove();
      return el?.[prop!] === w;
    };
    const summaryDone = ['#f-summary', 'value', want];
    await Promise.all([
      pa.waitForFunction(converged, summaryDone, { timeout: 15_000 }),
      pb.waitForFunction(converged, summaryDone, { timeout: 15_000 }),
    ]);
    // Presence of the field being edited shows beside its label.
    await pa.locator('[data-field="summary"] .dot').waitFor();

    // Rich text: ProseMirror bound with y-prosemirror; both type at once, at either end.
    const ra = pa.getByRole('textbox', { name: 'Body' });
    const rb = pb.getByRole('textbox', { name: 'Body' });
    await ra.click();
    await pa.keyboard.press('End');
    await rb.click();
    await pb.keyboard.press('Home');
    await Promise.all([pa.keyboard.type(' and A', { delay: 15 }), pb.keyboard.type('B says: ', { delay: 15 })]);
    const rich = 'B says: Rich text body and A';
    const richDone = ['[aria-labelledby="f-body-label"]', 'textContent', rich];
    await Promise.all([
      pa.waitForFunction(converged, richDone, { timeout: 15_000 }),
      pb.waitForFunction(converged, richDone, { timeout: 15_000 }),
    ]);
    await shot(pa, 'collaboration');
    // What the room saves is the editors' HTML: publish, then read it through the public API.
    await pa.getByRole('button', { name: 'Publish', exact: true }).click();
    await pa.getByRole('status').filter({ hasText: 'Published' }).waitFor();
    const res = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': project.publicKey },
      body: JSON.stringify({ query: 'query($id: ID!) { article(_id: $id) { content } }', variables: { id: recordId } }),
    });
    const content = ((await res.json()) as any).data.article.content;
    expect(content.summary).toBe(want);
    expect(content.body).toBe(`<p>${rich}</p>`);
    await a.close();
    await b.close();
  }, 90_000);

  test('a viewer sees the record read-only and the server refuses their writes', async () => {
    const ctx = await context(390, 844);
    const page = await firstSignIn(ctx, viewerLink);
    await page.goto(`${server.apiUrl}/studio/p/${project.projectId}/m/article/r/${recordId}`);
    await page.getByText('You have read-only access').waitFor();
    await page.getByLabel('Title').waitFor();
    expect(await page.getByLabel('Title').evaluate((el) => (el as unknown as { readOnly: boolean }).readOnly)).toBe(
      true,
    );
    expect(await page.getByRole('button', { name: 'Publish', exact: true }).count()).toBe(0);
    await shot(page, 'viewer-mobile');
    // No "API keys" in the sidebar for a viewer (only owners and admins may use it); the page
    // itself says so instead of failing.
    const side = page.getByRole('navigation', { name: 'Project' });
    await side.getByRole('link', { name: 'Files' }).waitFor();
    expect(await side.getByRole('link', { name: 'API keys' }).count()).toBe(0);
    await page.goto(`${server.apiUrl}/studio/p/${project.projectId}/keys`);
    await page.getByText('Only owners and admins manage API keys.').waitFor();
    // The Projects page: a project id (28 characters, unbroken) stays inside its card, on a phone
    // and in the narrow columns of wider screens.
    await page.goto(`${server.apiUrl}/studio/`);
    await page.getByRole('list', { name: 'Projects' }).waitFor();
    for (const width of [390, 520, 1010]) {
      await page.setViewportSize({ width, height: 844 });
      const overflowing = await page
        .locator('.card')
        .evaluateAll((cards) => cards.filter((c) => c.scrollWidth > c.clientWidth).length);
      expect({ width, overflowing }).toEqual({ width, overflowing: 0 });
    }
    // The UI hides the buttons; the server is what enforces it (the same public API).
    const answer: any = await page.evaluate(
      async ([pid, id]) => {
        const meta: any = await fetch('/studio/api/session').then((r) => r.json());
        const r = await fetch('/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-csrf-token': meta.csrf, 'x-project-id': pid! },
          body: JSON.stringify({
            query: 'mutation($id:ID!){ updateArticle(_id:$id, data:{ title: "hacked" }) { _id } }',
            variables: { id },
          }),
        });
        return r.json();
      },
      [project.projectId, recordId],
    );
    expect(answer.errors[0].message).toBe('missing required scope: records:write');
    await ctx.close();
  }, 60_000);

  test('the GraphQL explorer is the real GraphiQL, loaded on demand, querying as the member', async () => {
    await explorerBuilt;
    const ctx = await context();
    const page = await passwordSignIn(ctx, server, 'ed@acme.test');
    const introspected = page.waitForResponse(
      (r) => r.url().endsWith('/graphql') && (r.request().postData() ?? '').includes('__schema') && r.status() === 200,
      { timeout: 60_000 },
    );
    await page.goto(`${server.apiUrl}/studio/p/${project.projectId}/graphql`);
    await page.locator('.graphiql-container').waitFor({ timeout: 60_000 });
    await introspected;
    await page.locator('.graphiql-container .monaco-editor').first().waitFor();
    // Run the starter query (the project's first model) with GraphiQL's own button.
    const ran = page.waitForResponse(
      (r) => r.url().endsWith('/graphql') && (r.request().postData() ?? '').includes('totalCount'),
    );
    await page.locator('.graphiql-execute-button').click();
    expect(((await (await ran).json()) as any).data.categorys.totalCount).toBe(0);
    await page.locator('.graphiql-response').getByText('totalCount').waitFor();
    await shot(page, 'graphql-explorer');
    // Save the document in the editor to the project's trusted documents (docs/documents.md).
    await page.getByRole('button', { name: 'Save as trusted document' }).click();
    await page.getByRole('status').getByText('Saved as trusted document sha256:').waitFor();
    const listed = await fetch(`${server.apiUrl}/v1/control/projects/${project.projectId}/documents`, {
      headers: { authorization: `Bearer ${project.ownerKey}` },
    });
    const docs0 = ((await listed.json()) as any).documents;
    expect(docs0).toHaveLength(1);
    expect(docs0[0].valid).toBe(true);
    // Docs: the schema the member sees, browsable from the root type.
    await page.getByRole('button', { name: 'Show Documentation Explorer' }).click();
    const docs = page.locator('.graphiql-doc-explorer');
    await docs.getByRole('link', { name: 'Query' }).first().click();
    await docs.getByRole('link', { name: 'articles' }).first().waitFor();
    // Autocompletion from the schema (monaco-graphql in its worker), in a fresh query.
    await page.locator('.graphiql-query-editor .monaco-editor').first().click();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('{ artic');
    await page.keyboard.press('Control+Space');
    await page.locator('.suggest-widget').getByText('articles').first().waitFor();
    await ctx.close();
  }, 120_000);

  test('no console errors on the way', () => {
    expect(chrome.consoleErrors).toEqual([]);
  });
});
