import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../support/server.ts';
import { controlAs, pushedProject, signedInBrowser, type StudioBrowser } from './support.ts';
import { need } from '../support/binaries.ts';
import { gqlAt } from '../support/process.ts';

/** Headless Chromium, or undefined on a box without it (the file's tests skip, one line says why). */
const CHROMIUM = need('chromium');

/**
 * Releases in the Studio, in headless Chromium, as an editor: create a release, add the record
 * being edited to it from the editor (with what was typed), see it listed, publish it; the
 * public API then serves the record.
 */
let server: TestServer;
let chrome: StudioBrowser;
let page: Page;
let projectId: string;
let ownerKey: string;
let publicKey: string;

/** The control plane as the project's owner; throws with the answer on a non-2xx. */
const control = (method: string, path: string, body?: unknown): Promise<any> =>
  controlAs(server, ownerKey, method, path, body);

const url = (path: string) => `${server.apiUrl}/studio/p/${projectId}${path}`;
const live = async (id: string) =>
  (await gqlAt(server.apiUrl, publicKey, 'query($id: ID!) { note(_id: $id) { title } }', { id })).data.note;

beforeAll(async () => {
  if (!CHROMIUM) return;
  server = await startTestServer();
  ({ projectId, ownerKey } = await pushedProject(server, 'releases', 'Releases', {
    models: [{ key: 'note', name: 'Note', fields: [{ key: 'title', type: 'text', label: 'Title' }] }],
  }));
  publicKey = (
    await control('POST', '/api-keys', { name: 'web', type: 'public', project: projectId, scopes: ['records:read'] })
  ).key;
  ({ chrome, page } = await signedInBrowser(
    CHROMIUM,
    server,
    ownerKey,
    { email: 'editor@acme.test', role: 'editor', projectId },
    [1280, 860],
  ));
}, 60_000);

afterAll(async () => {
  await chrome?.close();
  await server?.stop();
});

describe.skipIf(!CHROMIUM)('releases in the Studio', () => {
  test('an editor creates a release, adds the record being edited, and publishes the release', async () => {
    await page.goto(url('/releases'));
    await page.getByRole('heading', { name: 'Releases' }).waitFor();
    await page.getByLabel('New release').fill('Autumn issue');
    await page.getByRole('button', { name: 'Create release' }).click();
    await page.getByRole('status').filter({ hasText: 'Release created' }).waitFor();
    await page.getByRole('cell', { name: 'Autumn issue', exact: true }).waitFor();

    // A new note, edited in its room, then added to the release from the editor.
    await page.goto(url('/m/note/r/new'));
    await page.getByLabel('Title').fill('Leaves');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/\/r\/rec_/);
    const id = page.url().split('/r/')[1]!;
    const title = page.getByLabel('Title');
    await title.waitFor();
    await title.click();
    await page.keyboard.press('End');
    await page.keyboard.type(' fall');
    expect(await page.getByLabel('Release').inputValue()).toMatch(/^rel_/);
    await page.getByRole('button', { name: 'Add to release' }).click();
    await page.getByText('Added to Autumn issue').waitFor();
    await page.getByLabel('In releases').filter({ hasText: 'Autumn issue' }).waitFor();
    expect(await live(id)).toBeNull();

    // The list shows it; publishing it makes the record live with what was typed.
    await page.getByRole('link', { name: 'Releases' }).click();
    const list = page.getByRole('list', { name: 'Records in Autumn issue' });
    await list.getByText(`note ${id}`).waitFor();
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Publish release' }).click();
    await page.getByRole('status').filter({ hasText: 'Published Autumn issue' }).waitFor();
    await page.locator('.badge.published').waitFor();
    expect(await live(id)).toEqual({ title: 'Leaves fall' });
    expect(chrome.consoleErrors).toEqual([]);
  }, 90_000);
});
