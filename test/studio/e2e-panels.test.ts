import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Page } from 'playwright-core';
import { startTestServer, type TestServer } from '../support/server.ts';
import { controlAs, pushedProject, coverPng, signedInBrowser, type StudioBrowser } from './support.ts';
import { need } from '../support/binaries.ts';

/** Headless Chromium, or undefined on a box without it (the file's tests skip, one line says why). */
const CHROMIUM = need('chromium');

/**
 * The rest of a project at a glance, in headless Chromium, as a project admin: API keys (the
 * value shown once, disable), customers with their roles, schedules run on demand, executions
 * with live progress from `jobs:*`, the files library, and a placement as a tab of the record
 * editor with the record's context.
 */

let server: TestServer;
let chrome: StudioBrowser;
let page: Page;
let projectId: string;
let ownerKey: string;
let endpoint: ReturnType<typeof Bun.serve>;

/** The control plane as the project's owner; throws with the answer on a non-2xx. */
const control = (method: string, path: string, body?: unknown): Promise<any> =>
  controlAs(server, ownerKey, method, path, body);

const url = (path: string) => `${server.apiUrl}/studio/p/${projectId}${path}`;
const read = (key: string) =>
  fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query: '{ notes(first: 1) { totalCount } }' }),
  });

beforeAll(async () => {
  if (!CHROMIUM) return;
  server = await startTestServer({ SVC_OPERATIONS_POLL_MS: '50' });
  endpoint = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => Response.json({ done: true }) });
  ({ projectId, ownerKey } = await pushedProject(server, 'panels', 'Panels', {
    models: [
      { key: 'note', name: 'Note', fields: [{ key: 'title', type: 'text', label: 'Title' }] },
      { key: 'memo', name: 'Memo', versioned: false, fields: [{ key: 'title', type: 'text', label: 'Title' }] },
    ],
    operationBaseUrl: `http://127.0.0.1:${endpoint.port}`,
    operations: [{ key: 'report', name: 'Nightly report', endpoint: '/report' }],
    schedules: [{ key: 'nightly', operationKey: 'report', cron: '30 2 * * *', timezone: 'Europe/Berlin' }],
    customerRoles: [{ key: 'member', name: 'Member', permissions: ['records:read'] }],
    placements: [{ type: 'main-editor', url: `${server.apiUrl}/health`, modelKeys: ['note'], tabName: 'Preview' }],
  }));
  ({ chrome, page } = await signedInBrowser(
    CHROMIUM,
    server,
    ownerKey,
    { email: 'admin@acme.test', role: 'admin', projectId },
    [1280, 860],
  ));
}, 60_000);

afterAll(async () => {
  await chrome?.close();
  endpoint?.stop(true);
  await server?.stop();
});

describe.skipIf(!CHROMIUM)('project panels', () => {
  test('API keys: created with the value shown once, then disabled, and the server agrees', async () => {
    await page.goto(url('/keys'));
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await page.getByLabel('Name').fill('website');
    await page.getByLabel('Type').selectOption('public');
    await page.getByLabel('Scopes').fill('records:read');
    await page.getByRole('button', { name: 'Create key' }).click();
    const value = (await page.locator('code.secret').textContent())!;
    expect(value).toMatch(/^pk_/);
    expect((await read(value)).status).toBe(200);
    const row = page.locator('tr', { hasText: 'website' });
    await row.waitFor();
    // Shown once: after a reload only the hint remains.
    await page.reload();
    await row.waitFor();
    expect(await page.content()).not.toContain(value);
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.locator('.badge', { hasText: 'disabled' }).waitFor();
    const end = Date.now() + 10_000;
    let status = 200;
    while ((status = (await read(value)).status) === 200 && Date.now() < end) await Bun.sleep(50);
    expect(status).toBe(401);
  }, 60_000);

  test("customers with their roles, and the project's roles", async () => {
    const id = `cus_${Math.random().toString(16).slice(2, 10)}`;
    await server.svc
      .sql`insert into customers (id, project_id, email, name) values (${id}, ${projectId}, 'ada@example.com', 'Ada')`;
    await server.svc
      .sql`insert into customer_role_assignments (project_id, customer_id, role_id) select ${projectId}, ${id}, id from customer_roles where project_id = ${projectId} and key = 'member'`;
    await page.goto(url('/customers'));
    const row = page.locator('tr', { hasText: 'ada@example.com' });
    await row.waitFor();
    // Email, name, then the roles column.
    expect(await row.locator('td').nth(1).textContent()).toBe('Ada');
    expect(await row.locator('td').nth(2).textContent()).toBe('member');
    await page.locator('li', { hasText: 'Member' }).locator('code', { hasText: 'member' }).waitFor();
  }, 60_000);

  test('a schedule run on demand shows up under operations, which follow progress live', async () => {
    await page.goto(url('/schedules'));
    const row = page.locator('tr', { hasText: 'nightly' });
    await row.waitFor();
    expect(await row.textContent()).toContain('Europe/Berlin');
    await row.getByRole('button', { name: 'Run now' }).click();
    await page.getByRole('status').filter({ hasText: 'Triggered' }).waitFor();

    await page.goto(url('/operations'));
    await page.getByRole('status').filter({ hasText: 'live' }).waitFor();
    await page.getByText('Nightly report').waitFor();
    // The triggered run completes against the endpoint; the list follows without a reload.
    await page
      .locator('tr', { hasText: 'report' })
      .locator('.badge', { hasText: 'completed' })
      .waitFor({ timeout: 20_000 });
    // Progress of a running execution, reported by its operation, arrives through jobs:*.
    const exe = `exe_${Math.random().toString(16).slice(2, 10)}`;
    await server.svc
      .sql`insert into operation_executions (id, project_id, operation_key, url, status, progress_pct) values (${exe}, ${projectId}, 'report', 'http://127.0.0.1:9/x', 'running', 10)`;
    await server.svc.bus.publish({
      type: 'execution.changed',
      projectId,
      executionId: exe,
      operationKey: 'report',
      status: 'running',
      progressPct: 10,
      progressMessage: null,
      resultJson: null,
      errorJson: null,
    });
    await page.locator('tr', { hasText: exe }).getByRole('progressbar', { name: '10%' }).waitFor();
    await server.svc
      .sql`update operation_executions set progress_pct = 60, progress_message = 'Half way' where id = ${exe}`;
    await server.svc.bus.publish({
      type: 'execution.changed',
      projectId,
      executionId: exe,
      operationKey: 'report',
      status: 'running',
      progressPct: 60,
      progressMessage: 'Half way',
      resultJson: null,
      errorJson: null,
    });
    await page.locator('tr', { hasText: exe }).getByRole('progressbar', { name: '60%' }).waitFor();
    expect(await page.locator('tr', { hasText: exe }).textContent()).toContain('Half way');
  }, 60_000);

  test("the files library uploads and lists; a placement is a tab with the record's context", async () => {
    await page.goto(url('/files'));
    await page.getByRole('heading', { name: 'Files' }).waitFor();
    await page
      .locator('input[type=file]')
      .setInputFiles({ name: 'banner.png', mimeType: 'image/png', buffer: await coverPng() });
    const item = page.locator('li.file', { hasText: 'banner.png' });
    await item.waitFor();
    expect(await item.textContent()).toContain('480×270');

    const note = await control('POST', `/projects/${projectId}/records`, {
      model: 'note',
      naturalKey: 'n-1',
      data: { title: 'Hello' },
    });
    await page.goto(url(`/m/note/r/${note._id}`));
    await page.getByLabel('Title').waitFor();
    await page.getByRole('tab', { name: 'Preview' }).click();
    const frame = page.locator('iframe[title="Preview"]');
    await frame.waitFor();
    const src = new URL((await frame.getAttribute('src'))!);
    expect(Object.fromEntries(src.searchParams)).toMatchObject({ projectId, modelKey: 'note', recordId: note._id });
    // The panel loads (here the service's own /health stands in for an app's page).
    await page.frameLocator('iframe[title="Preview"]').locator('body', { hasText: '"status"' }).waitFor();
  }, 60_000);

  test('an unversioned model saves itself: the save bar shows autosaving, then saved, and the API serves the text', async () => {
    const memo = await control('POST', `/projects/${projectId}/records`, {
      model: 'memo',
      naturalKey: 'm-1',
      data: { title: 'Draft' },
    });
    await page.goto(url(`/m/memo/r/${memo._id}`));
    const title = page.getByLabel('Title');
    await title.waitFor();
    // No draft/publish buttons to press: the indicator follows the room's own saves.
    expect(await page.getByRole('button', { name: 'Save draft' }).count()).toBe(0);
    await title.click();
    await page.keyboard.press('End');
    await page.keyboard.type(' kept');
    await page.locator('.savebar').getByRole('status').filter({ hasText: 'Autosaving…' }).waitFor();
    await page
      .locator('.savebar')
      .getByRole('status')
      .filter({ hasText: /^Saved · / })
      .waitFor({ timeout: 30_000 });
    const reader = (
      await control('POST', '/api-keys', {
        name: 'memo-reader',
        type: 'public',
        project: projectId,
        scopes: ['records:read'],
      })
    ).key;
    const end = Date.now() + 15_000;
    let got = '';
    do {
      const r = await fetch(`${server.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': reader },
        body: JSON.stringify({ query: 'query($id: ID!) { memo(_id: $id) { content } }', variables: { id: memo._id } }),
      });
      got = ((await r.json()) as any).data?.memo?.content?.title ?? '';
    } while (got !== 'Draft kept' && Date.now() < end && (await Bun.sleep(100), true));
    expect(got).toBe('Draft kept');
  }, 60_000);

  test('no console errors on the way', () => {
    expect(chrome.consoleErrors).toEqual([]);
  });
});
