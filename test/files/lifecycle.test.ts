import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, form, png, type FilesProject } from './support.ts';

/** Soft delete hides a file and 404s its URL but keeps the bytes; restore brings it back; permanent delete frees the bytes once unshared. */
let server: TestServer;
let p: FilesProject;

beforeAll(async () => {
  server = await startTestServer();
  p = await filesProject(server, 'life');
}, 30_000);

afterAll(async () => {
  await server.stop();
});

const LIST = '{ files { edges { node { id } } } }';

test('soft delete, restore, permanent delete', async () => {
  const writer = await p.key(['files:write']);
  const admin = await p.key(['files:delete', 'files:list', 'files:read']);
  const bytes = png(6, 6, 4);
  const a = (await p.upload(writer, form({ file: [new Blob([bytes]), 'a.png'] }))).body;
  const b = (await p.upload(writer, form({ file: [new Blob([bytes]), 'b.png'] }))).body;
  const sha = (await p.gql(admin, 'query($id: ID!) { file(id: $id) { sha256 } }', { id: a.id })).data.file.sha256;
  const blob = join(server.dataDir, 'files', sha.slice(0, 2), sha.slice(2, 4), sha);

  const del = await p.gql(admin, 'mutation($id: ID!) { deleteFile(id: $id) { id deletedAt } }', { id: a.id });
  expect(del.data.deleteFile.deletedAt).not.toBeNull();
  expect((await fetch(a.url)).status).toBe(404);
  expect((await p.gql(admin, LIST)).data.files.edges.map((e: any) => e.node.id)).toEqual([b.id]);
  expect((await p.gql(admin, 'query($id: ID!) { file(id: $id) { id } }', { id: a.id })).data.file).toBeNull();
  expect(existsSync(blob)).toBe(true);

  const res = await p.gql(admin, 'mutation($id: ID!) { restoreFile(id: $id) { id deletedAt } }', { id: a.id });
  expect(res.data.restoreFile.deletedAt).toBeNull();
  expect((await fetch(a.url)).status).toBe(200);

  // b shares the bytes: deleting a for good keeps them; deleting b too frees them.
  expect(
    (await p.gql(admin, 'mutation($id: ID!) { permanentlyDeleteFile(id: $id) }', { id: a.id })).data
      .permanentlyDeleteFile,
  ).toBe(true);
  expect((await fetch(a.url)).status).toBe(404);
  expect(existsSync(blob)).toBe(true);
  expect((await fetch(b.url)).status).toBe(200);
  await p.gql(admin, 'mutation($id: ID!) { permanentlyDeleteFile(id: $id) }', { id: b.id });
  expect(existsSync(blob)).toBe(false);
  const gone = await p.gql(admin, 'mutation($id: ID!) { restoreFile(id: $id) { id } }', { id: b.id });
  expect(gone.errors[0].extensions.code).toBe('NOT_FOUND');
});

test('without files:delete the mutations answer missing required scope; another project cannot delete', async () => {
  const writer = await p.key(['files:write']);
  const f = (await p.upload(writer, form({ file: [new Blob([png(2, 2, 8)]), 'x.png'] }))).body;
  const r = await p.gql(writer, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: f.id });
  expect(r.errors[0].message).toBe('missing required scope: files:delete');
  const other = await filesProject(server, 'life-other');
  const od = await other.gql(await other.key(['files:delete']), 'mutation($id: ID!) { deleteFile(id: $id) { id } }', {
    id: f.id,
  });
  expect(od.errors[0].extensions.code).toBe('NOT_FOUND');
  expect((await fetch(f.url)).status).toBe(200);
});

test("the same bytes in two projects: deleting one project's file for good keeps the other's served", async () => {
  const bytes = png(7, 5, 31);
  const mine = (await p.upload(await p.key(['files:write']), form({ file: [new Blob([bytes]), 'shared.png'] }))).body;
  const other = await filesProject(server, 'life-shared');
  const theirs = (
    await other.upload(await other.key(['files:write']), form({ file: [new Blob([bytes]), 'shared.png'] }))
  ).body;
  expect(theirs.id).not.toBe(mine.id);
  const admin = await p.key(['files:delete', 'files:read']);
  const sha = (await p.gql(admin, 'query($id: ID!) { file(id: $id) { sha256 } }', { id: mine.id })).data.file.sha256;
  const blob = join(server.dataDir, 'files', sha.slice(0, 2), sha.slice(2, 4), sha);
  expect(
    (await p.gql(admin, 'mutation($id: ID!) { permanentlyDeleteFile(id: $id) }', { id: mine.id })).data
      .permanentlyDeleteFile,
  ).toBe(true);
  expect((await fetch(mine.url)).status).toBe(404);
  const served = await fetch(theirs.url);
  expect(served.status).toBe(200);
  expect(new Uint8Array(await served.arrayBuffer())).toEqual(new Uint8Array(bytes));
  expect(existsSync(blob)).toBe(true);
  // The other project's key cannot see or remove the first project's (now gone) file either.
  const od = await other.gql(
    await other.key(['files:delete']),
    'mutation($id: ID!) { permanentlyDeleteFile(id: $id) }',
    { id: mine.id },
  );
  expect(od.errors[0].extensions.code).toBe('NOT_FOUND');
});
