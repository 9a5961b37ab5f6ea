import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { startTestServer, type TestServer } from '../support/server.ts';
import sharp from 'sharp';
import { filesProject, form, png } from './support.ts';
import { spawnBeside } from '../support/process.ts';

/** Two processes on one PostgreSQL and one data folder: a file uploaded through one is served by the other. */
let server: TestServer;
let proc: Subprocess<'ignore', 'pipe', 'pipe'> | null = null;
let otherBase: string | null = null;

beforeAll(async () => {
  server = await startTestServer();
}, 30_000);

afterAll(async () => {
  proc?.kill('SIGKILL');
  await server.stop();
});

test('a file uploaded through one process is served, with its headers, by another', async () => {
  const p = await filesProject(server, 'two');
  const key = await p.key(['files:write']);
  let url: string;
  ({ proc, url } = await spawnBeside(server));
  otherBase = url;
  const bytes = png(7, 3, 5);
  const r = await p.upload(key, form({ file: [new Blob([bytes]), 'pic.png'] }));
  expect(r.status).toBe(201);
  const other = `${url}${new URL(r.body.url).pathname}`;
  const res = await fetch(other);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('image/png');
  expect(Buffer.from(await res.arrayBuffer()).toString('hex')).toBe(Buffer.from(bytes).toString('hex'));
  const part = await fetch(other, { headers: { range: 'bytes=0-7' } });
  expect(part.status).toBe(206);
  expect((await part.arrayBuffer()).byteLength).toBe(8);
}, 60_000);

test('an image uploaded through one process is transformed by the other; a delete on the first is seen by the second at once', async () => {
  const p = await filesProject(server, 'two-img');
  const key = await p.key(['files:write', 'files:read', 'files:delete']);
  const other = otherBase!;
  const bytes = new Uint8Array(
    await sharp({ create: { width: 500, height: 250, channels: 3, background: '#884422' } })
      .jpeg()
      .toBuffer(),
  );
  const r = await p.upload(key, form({ file: [new Blob([bytes]), 'wide.jpg'] }));
  expect(r.status).toBe(201);
  const path = new URL(r.body.url).pathname;
  const res = await fetch(`${other}${path}?w=100&format=webp`);
  expect(res.status).toBe(200);
  expect(await sharp(new Uint8Array(await res.arrayBuffer())).metadata()).toMatchObject({
    format: 'webp',
    width: 100,
    height: 50,
  });
  // The first process finds the variant the second one stored (same data folder): generated once.
  const before = server.svc.files.images.generated;
  expect((await fetch(`${r.body.url}?format=webp&w=100`)).status).toBe(200);
  expect(server.svc.files.images.generated).toBe(before);
  await p.gql(key, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: r.body.id });
  // The other process caches live rows; the delete reaches it over the bus (LISTEN/NOTIFY).
  const end = Date.now() + 15_000;
  while ((await fetch(`${other}${path}`)).status !== 404 && Date.now() < end) await Bun.sleep(50);
  expect((await fetch(`${other}${path}`)).status).toBe(404);
  expect((await fetch(`${other}${path}?w=100&format=webp`)).status).toBe(404);

  // A two-step upload created on the first process is PUT and confirmed through the second.
  const small = png(6, 5, 2);
  const t = (
    await p.gql(
      key,
      'mutation($s: Int!) { createFileUpload(filename: "s.png", contentType: "image/png", size: $s) { fileId uploadUrl } }',
      { s: small.length },
    )
  ).data.createFileUpload;
  const u = new URL(t.uploadUrl);
  expect((await fetch(`${other}${u.pathname}${u.search}`, { method: 'PUT', body: small })).status).toBe(200);
  const c = await fetch(`${other}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({
      query: 'mutation($id: ID!) { confirmFileUpload(fileId: $id) { id width height } }',
      variables: { id: t.fileId },
    }),
  });
  expect(((await c.json()) as any).data.confirmFileUpload).toEqual({ id: t.fileId, width: 6, height: 5 });
}, 60_000);
