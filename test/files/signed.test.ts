import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, form, png, type FilesProject } from './support.ts';

/**
 * Two-step uploads (createFileUpload → PUT to the signed URL → confirmFileUpload), the per-project
 * quota, and customers seeing and managing only their own uploads.
 */
setDefaultTimeout(60_000);
let server: TestServer;
let p: FilesProject;
let other: FilesProject;
let writer: string;

const CREATE = `mutation($f: String!, $t: String!, $s: Int!, $alt: String) { createFileUpload(filename: $f, contentType: $t, size: $s, alt: $alt) { fileId uploadUrl method headers expiresAt } }`;
const CONFIRM = `mutation($id: ID!) { confirmFileUpload(fileId: $id) { id url filename contentType size width height alt } }`;

beforeAll(async () => {
  server = await startTestServer({ SVC_FILES_MAX_BYTES: '100000' });
  p = await filesProject(server, 'two-step');
  other = await filesProject(server, 'two-step-other');
  writer = await p.key(['files:write', 'files:read', 'files:list', 'files:delete']);
});

afterAll(async () => {
  await server.stop();
});

const staged = () => {
  const dir = join(server.dataDir, 'files', 'staged');
  return existsSync(dir) ? readdirSync(dir) : [];
};
const put = (url: string, body: Uint8Array | string, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'PUT', body: body as unknown as Blob, headers });

async function ticket(
  bytes: { length: number },
  type = 'image/png',
  key = writer,
  project = p,
  extra: Record<string, string> = {},
) {
  const r = await project.gql(key, CREATE, { f: 'cat.png', t: type, s: bytes.length }, extra);
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.createFileUpload;
}

describe('two-step upload', () => {
  test('create, PUT, confirm: the file answers at the id given up front; confirming again answers it again', async () => {
    const bytes = png(12, 7, 3);
    const r = await p.gql(writer, CREATE, { f: '../x/cat.png', t: 'image/png', s: bytes.length, alt: 'A cat' });
    const t = r.data.createFileUpload;
    expect(t.fileId).toMatch(/^file_[0-9a-f]{24}$/);
    expect(t.method).toBe('PUT');
    expect(t.headers).toEqual({ 'content-type': 'image/png' });
    expect(Date.parse(t.expiresAt)).toBeGreaterThan(Date.now());
    const res = await put(t.uploadUrl, bytes, t.headers);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ fileId: t.fileId, size: bytes.length });
    const c = await p.gql(writer, CONFIRM, { id: t.fileId });
    expect(c.data.confirmFileUpload).toMatchObject({
      id: t.fileId,
      filename: 'cat.png',
      contentType: 'image/png',
      size: bytes.length,
      width: 12,
      height: 7,
      alt: 'A cat',
    });
    const got = await fetch(c.data.confirmFileUpload.url);
    expect(Buffer.from(await got.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
    expect((await p.gql(writer, CONFIRM, { id: t.fileId })).data.confirmFileUpload.id).toBe(t.fileId);
    expect(staged()).toEqual([]);
  });

  test('the URL is single-use: a second PUT is a CONFLICT', async () => {
    const bytes = png(3, 3, 1);
    const t = await ticket(bytes);
    expect((await put(t.uploadUrl, bytes)).status).toBe(200);
    const again = await put(t.uploadUrl, bytes);
    expect(again.status).toBe(409);
    expect(((await again.json()) as any).error).toBe('CONFLICT');
  });

  test('an expired URL and a wrong token are refused', async () => {
    const bytes = png(3, 3, 2);
    const t = await ticket(bytes);
    const forged = new URL(t.uploadUrl);
    forged.searchParams.set('token', 'ut_00');
    const bad = await put(forged.toString(), bytes);
    expect(bad.status).toBe(403);
    await server.svc.sql`update file_uploads set expires_at = now() - interval '1 second' where id = ${t.fileId}`;
    const late = await put(t.uploadUrl, bytes);
    expect(late.status).toBe(403);
    expect(((await late.json()) as any).message).toContain('expired');
    const c = await p.gql(writer, CONFIRM, { id: t.fileId });
    expect(c.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  test('a body over the declared size is refused while streaming and the URL can be used again; a short body too', async () => {
    const bytes = png(4, 4, 5);
    const t = await ticket(bytes);
    const big = await put(t.uploadUrl, new Uint8Array(bytes.length + 10));
    expect(big.status).toBe(413);
    expect(((await big.json()) as any).error).toBe('PAYLOAD_TOO_LARGE');
    const short = await put(t.uploadUrl, bytes.subarray(0, 10));
    expect(short.status).toBe(400);
    expect(staged()).not.toContain(t.fileId);
    expect((await put(t.uploadUrl, bytes)).status).toBe(200);
    expect((await p.gql(writer, CONFIRM, { id: t.fileId })).data.confirmFileUpload.width).toBe(4);
  });

  test("confirm refusals: nothing uploaded yet, a PNG header on HTML, another project's upload", async () => {
    const bytes = png(5, 5, 6);
    const t = await ticket(bytes);
    const early = await p.gql(writer, CONFIRM, { id: t.fileId });
    expect(early.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const foreign = await other.gql(await other.key(['files:write']), CONFIRM, { id: t.fileId });
    expect(foreign.errors[0].extensions.code).toBe('NOT_FOUND');

    const html = Buffer.concat([
      Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
      Buffer.from('<html><script>alert(1)</script></html>'),
    ]);
    const h = await ticket(html);
    expect((await put(h.uploadUrl, html)).status).toBe(200);
    const c = await p.gql(writer, CONFIRM, { id: h.fileId });
    expect(c.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(staged()).not.toContain(h.fileId);
    const rows = await server.svc.sql`select 1 from files where id = ${h.fileId}`;
    expect(rows.length).toBe(0);
    expect((await p.gql(writer, CONFIRM, { id: h.fileId })).errors[0].extensions.code).toBe('NOT_FOUND');
  });

  test('create refusals: over the file limit, a bad type, a type the key may not upload', async () => {
    const big = await p.gql(writer, CREATE, { f: 'a.bin', t: 'application/octet-stream', s: 200_000 });
    expect(big.errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
    const bad = await p.gql(writer, CREATE, { f: 'a.bin', t: 'not a type', s: 10 });
    expect(bad.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const imagesOnly = await p.key(['files:write'], { allowedFileTypes: ['image/*'] });
    const pdf = await p.gql(imagesOnly, CREATE, { f: 'a.pdf', t: 'application/pdf', s: 10 });
    expect(pdf.errors[0].extensions.code).toBe('PERMISSION_DENIED');
  });

  test('without files:write the mutations answer missing required scope', async () => {
    const r = await p.gql(await p.key(['files:read']), CREATE, { f: 'a', t: 'image/png', s: 1 });
    expect(r.errors[0].message).toBe('missing required scope: files:write');
  });
});

describe('quota', () => {
  test('a project over its quota refuses uploads of either kind with 413 naming the quota', async () => {
    const q = await filesProject(server, 'quota');
    const k = await q.key(['files:write']);
    await server.svc
      .sql`update projects set settings = jsonb_set(settings, '{files}', '{"quotaBytes": 3000}') where id = ${q.projectId}`;
    const first = await q.upload(k, form({ file: [new Blob([new Uint8Array(2000).fill(7)]), 'a.bin'] }));
    expect(first.status).toBe(201);
    const second = await q.upload(k, form({ file: [new Blob([new Uint8Array(2000).fill(8)]), 'b.bin'] }));
    expect(second.status).toBe(413);
    expect(second.body).toMatchObject({ error: 'PAYLOAD_TOO_LARGE', quota: 3000, used: 2000 });
    const t = await q.gql(k, CREATE, { f: 'c.bin', t: 'application/octet-stream', s: 2000 });
    expect(t.errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
    expect(t.errors[0].message).toContain('3000');
    expect((await q.upload(k, form({ file: [new Blob([new Uint8Array(900).fill(9)]), 'c.bin'] }))).status).toBe(201);
  });
});

describe('retention', () => {
  test('the sweep deletes for good files soft-deleted longer ago than the retention, and expired uploads', async () => {
    const bytes = png(6, 2, 11);
    const keep = (await p.upload(writer, form({ file: [new Blob([png(6, 2, 12)]), 'keep.png'] }))).body;
    const old = (await p.upload(writer, form({ file: [new Blob([bytes]), 'old.png'] }))).body;
    await p.gql(writer, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: keep.id });
    await p.gql(writer, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: old.id });
    await server.svc.sql`update files set deleted_at = now() - interval '31 days' where id = ${old.id}`;
    const t = await ticket(bytes);
    expect((await put(t.uploadUrl, bytes)).status).toBe(200);
    await server.svc.sql`update file_uploads set expires_at = now() - interval '2 hours' where id = ${t.fileId}`;
    const swept = await server.svc.files.sweep();
    expect(swept.files).toBeGreaterThanOrEqual(1);
    expect(swept.uploads).toBeGreaterThanOrEqual(1);
    expect((await server.svc.sql`select id from files where id in (${old.id}, ${keep.id})`).map((r) => r.id)).toEqual([
      keep.id,
    ]);
    expect(staged()).not.toContain(t.fileId);
    expect(
      (await p.gql(writer, 'mutation($id: ID!) { restoreFile(id: $id) { id } }', { id: keep.id })).data.restoreFile.id,
    ).toBe(keep.id);
  });
});

describe('ownership', () => {
  test('a customer lists, reads and manages only their own uploads; a server key sees them all', async () => {
    const pk = await p.key(['files:list', 'files:read'], { kind: 'pk' });
    const register = async () => {
      const e = `f${Math.random().toString(16).slice(2, 10)}@example.com`;
      const r = await p.gql(
        pk,
        `mutation($e: String!) { registerCustomer(email: $e, password: "files owner pw 1") { accessToken customer { id } } }`,
        { e },
      );
      return {
        id: r.data.registerCustomer.customer.id as string,
        auth: { authorization: `Bearer ${r.data.registerCustomer.accessToken}` },
      };
    };
    const [a, b] = [await register(), await register()];
    const fa = (await p.upload(writer, form({ file: [new Blob([png(2, 2, 21)]), 'a.png'] }), a.auth)).body;
    const fb = (await p.upload(writer, form({ file: [new Blob([png(2, 2, 22)]), 'b.png'] }), b.auth)).body;
    const LIST = '{ files(first: 100) { edges { node { id } } } }';
    const ids = async (key: string, auth: Record<string, string> = {}) =>
      (await p.gql(key, LIST, {}, auth)).data.files.edges.map((e: any) => e.node.id);
    expect(await ids(pk, a.auth)).toEqual([fa.id]);
    expect(await ids(pk, b.auth)).toEqual([fb.id]);
    expect(await ids(writer)).toEqual(expect.arrayContaining([fa.id, fb.id]));
    const READ = 'query($id: ID!) { file(id: $id) { id } }';
    expect((await p.gql(pk, READ, { id: fb.id }, a.auth)).data.file).toBeNull();
    expect((await p.gql(pk, READ, { id: fa.id }, a.auth)).data.file.id).toBe(fa.id);
    const del = await p.gql(writer, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: fb.id }, a.auth);
    expect(del.errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await fetch(fb.url)).status).toBe(200);
    // A two-step upload started for customer a is confirmed by a only.
    const bytes = png(3, 2, 23);
    const t = (await p.gql(writer, CREATE, { f: 'c.png', t: 'image/png', s: bytes.length }, a.auth)).data
      .createFileUpload;
    expect((await put(t.uploadUrl, bytes)).status).toBe(200);
    expect((await p.gql(writer, CONFIRM, { id: t.fileId }, b.auth)).errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await p.gql(writer, CONFIRM, { id: t.fileId }, a.auth)).data.confirmFileUpload.id).toBe(t.fileId);
    expect(await ids(pk, a.auth)).toEqual([t.fileId, fa.id]);
    // files:list.all (secret keys) lists every customer's uploads even with a customer's token.
    const all = await p.key(['files:list.all', 'files:read']);
    expect(await ids(all, a.auth)).toEqual(expect.arrayContaining([fa.id, fb.id, t.fileId]));
    expect((await p.gql(all, READ, { id: fb.id }, a.auth)).data.file.id).toBe(fb.id);
    // files:list alone on a secret key with a customer's token is that customer's view.
    const listOnly = await p.key(['files:list']);
    expect(await ids(listOnly, b.auth)).toEqual([fb.id]);
  });
});

describe('project.settings.files in the config', () => {
  test('limits must be whole numbers of 0 or more', async () => {
    const { validateConfig } = await import('../../src/config/validate.ts');
    const errors = (files: unknown) =>
      validateConfig({ key: 'k', name: 'n', project: { id: 'p', tenantId: 't', settings: { files } } }).errors.map(
        (e) => e.path,
      );
    expect(errors({ quotaBytes: 5_000_000, retentionDays: 0, maxFileBytes: 1000 })).toEqual([]);
    expect(errors({ quotaBytes: -1, retentionDays: 1.5, maxFileBytes: '10' })).toEqual([
      'project.settings.files.maxFileBytes',
      'project.settings.files.quotaBytes',
      'project.settings.files.retentionDays',
    ]);
  });
});
