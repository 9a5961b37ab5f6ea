import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../support/server.ts';
import { controlAs, pushedProject, signedInBrowser, type StudioBrowser } from './support.ts';
import { need } from '../support/binaries.ts';
import { gqlAt } from '../support/process.ts';

/** Headless Chromium, or undefined on a box without it (the file's tests skip, one line says why). */
const CHROMIUM = need('chromium');

/**
 * The editorial workflow in headless Chromium, as a project admin: restore a version from the
 * History tab (the open editor takes the restored content in), schedule a publish with the date
 * picker beside Publish (the "Scheduled" badge, the Scheduled list, the publish happening), and
 * the audit log view listing what was done. Checked against what the server stored.
 */
let server: TestServer;
let chrome: StudioBrowser;
let page: Page;
let projectId: string;
let ownerKey: string;
let sk: string;

/** The control plane as the project's owner; throws with the answer on a non-2xx. */
const control = (method: string, path: string, body?: unknown): Promise<any> =>
  controlAs(server, ownerKey, method, path, body);

async function gql(query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const body = await gqlAt(server.apiUrl, sk, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

const url = (path: string) => `${server.apiUrl}/studio/p/${projectId}${path}`;

beforeAll(async () => {
  if (!CHROMIUM) return;
  server = await startTestServer();
  ({ projectId, ownerKey } = await pushedProject(server, 'editorial', 'Editorial', {
    models: [
      {
        key: 'story',
        name: 'Story',
        fields: [
          { key: 'title', type: 'text', label: 'Title', required: true },
          { key: 'rank', type: 'number', label: 'Rank' },
        ],
      },
    ],
  }));
  sk = (await control('POST', '/api-keys', { name: 'server', type: 'secret', project: projectId, scopes: ['*'] })).key;
  ({ chrome, page } = await signedInBrowser(
    CHROMIUM,
    server,
    ownerKey,
    { email: 'admin@news.test', role: 'admin', projectId },
    [1280, 900],
  ));
}, 60_000);

afterAll(async () => {
  await chrome?.close();
  await server?.stop();
});

describe.skipIf(!CHROMIUM)('editorial workflow in the Studio', () => {
  test('restore this version, schedule a publish, see it in Scheduled and the audit log', async () => {
    const id = (await gql('mutation{ createStory(data:{ title:"First draft", rank: 1 }){ _id } }')).createStory._id;
    await gql('mutation($id:ID!){ updateStory(_id:$id, data:{ title:"Second draft", rank: 2 }){ _id } }', { id });

    await page.goto(url(`/m/story/r/${id}`));
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#f-title')?.value === 'Second draft');
    // History: version 1, its diff, Restore this version.
    await page.getByRole('tab', { name: 'History' }).click();
    await page
      .getByRole('list', { name: 'Versions' })
      .getByRole('button', { name: /^v1 · created/ })
      .click();
    await page.getByRole('button', { name: 'Restore this version' }).click();
    await page.getByRole('status').filter({ hasText: 'Restored version 1' }).waitFor();
    const draft = async () => (await gql('query($id:ID!){ story(_id:$id, preview:true){ title rank } }', { id })).story;
    expect(await draft()).toEqual({ title: 'First draft', rank: 1 });
    await page
      .getByRole('list', { name: 'Versions' })
      .getByRole('button', { name: /^v3 · restored from v1/ })
      .waitFor();
    // The open editor took the restored content in, without a reload.
    await page.getByRole('tab', { name: 'Content' }).click();
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#f-title')?.value === 'First draft');

    // Schedule a publish a few seconds ahead with the picker beside Publish.
    const at = new Date(Date.now() + 70_000);
    at.setSeconds(0, 0);
    const local = new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await page.getByLabel('Publish at').fill(local);
    await page.getByRole('button', { name: 'Schedule publish' }).click();
    await page.getByRole('status').filter({ hasText: 'Scheduled to publish' }).waitFor();
    await page.locator('.badge', { hasText: 'Scheduled' }).waitFor();
    const listed = (
      await gql('query{ scheduledActions{ edges { node { recordId action status at version } } } }')
    ).scheduledActions.edges.map((e: any) => e.node);
    expect(listed).toEqual([
      { recordId: id, action: 'publish', status: 'scheduled', at: at.toISOString(), version: expect.any(Number) },
    ]);

    // The Scheduled list shows it; Cancel works from there.
    await page.goto(url('/scheduled'));
    const upcoming = page.getByRole('table', { name: 'Upcoming' });
    await upcoming.getByRole('link', { name: new RegExp(id) }).waitFor();
    await upcoming.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('status').filter({ hasText: 'Cancelled' }).waitFor();
    expect(
      (await gql('query{ scheduledActions{ edges { node { status } } } }')).scheduledActions.edges[0].node.status,
    ).toBe('cancelled');

    // The audit log view lists what the admin did, newest first.
    await page.goto(url('/audit'));
    const log = page.getByRole('table', { name: 'Audit log' });
    await log.getByText('schedule.cancel').waitFor();
    const text = (await log.textContent()) ?? '';
    expect(text).toContain('schedule.publish');
    expect(text).toContain('record.updated');
    expect(text).toContain('member');
    expect(chrome.consoleErrors).toEqual([]);
  }, 120_000);
});
