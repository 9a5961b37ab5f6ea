import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, form, png, type FilesProject } from './support.ts';

/** `file(id)` and `files(...)` over GraphQL: scopes, paging, filters, and no crossing of projects. */
let server: TestServer;
let p: FilesProject;
let other: FilesProject;
let writer: string;
const ids: Record<string, string> = {};

const LIST = `query($first: Int, $after: String, $folder: String, $contentType: String) {
  files(first: $first, after: $after, folder: $folder, contentType: $contentType) { edges { cursor node { id filename contentType folder } } pageInfo { hasNextPage endCursor } } }`;

beforeAll(async () => {
  server = await startTestServer();
  p = await filesProject(server, 'gq');
  other = await filesProject(server, 'gq-other');
  writer = await p.key(['files:write']);
  const pdf = new TextEncoder().encode('%PDF-1.4\n%%EOF\n');
  for (const [name, body] of [
    ['a.png', form({ file: [new Blob([png(2, 2, 1)]), 'a.png'], folder: 'pets' })],
    ['b.png', form({ file: [new Blob([png(2, 3, 2)]), 'b.png'], folder: 'pets' })],
    ['c.pdf', form({ file: [new Blob([pdf]), 'c.pdf'], folder: 'docs' })],
  ] as const) {
    const r = await p.upload(writer, body);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    ids[name] = r.body.id;
  }
}, 30_000);

afterAll(async () => {
  await server.stop();
});

describe('file and files', () => {
  test('file(id) answers the file object with a URL that serves it', async () => {
    const k = await p.key(['files:read']);
    const r = await p.gql(
      k,
      'query($id: ID!) { file(id: $id) { id url filename contentType size width height folder createdAt } }',
      { id: ids['b.png'] },
    );
    expect(r.data.file).toMatchObject({
      id: ids['b.png'],
      filename: 'b.png',
      contentType: 'image/png',
      width: 2,
      height: 3,
      folder: 'pets',
    });
    const res = await fetch(r.data.file.url);
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(r.data.file.size);
  });

  test('another project cannot read the file by id', async () => {
    const k = await other.key(['files:read']);
    const r = await other.gql(k, 'query($id: ID!) { file(id: $id) { id } }', { id: ids['a.png'] });
    expect(r.data.file).toBeNull();
    const list = await other.gql(await other.key(['files:list']), LIST, {});
    expect(list.data.files.edges).toEqual([]);
  });

  test('files pages newest first and filters by folder and content type', async () => {
    const k = await p.key(['files:list']);
    const page1 = await p.gql(k, LIST, { first: 2 });
    expect(page1.data.files.edges.map((e: any) => e.node.filename)).toEqual(['c.pdf', 'b.png']);
    expect(page1.data.files.pageInfo.hasNextPage).toBe(true);
    const page2 = await p.gql(k, LIST, { first: 2, after: page1.data.files.pageInfo.endCursor });
    expect(page2.data.files.edges.map((e: any) => e.node.filename)).toEqual(['a.png']);
    expect(page2.data.files.pageInfo.hasNextPage).toBe(false);
    expect((await p.gql(k, LIST, { folder: 'pets' })).data.files.edges).toHaveLength(2);
    expect((await p.gql(k, LIST, { contentType: 'image/*' })).data.files.edges).toHaveLength(2);
    expect(
      (await p.gql(k, LIST, { contentType: 'application/pdf' })).data.files.edges.map((e: any) => e.node.id),
    ).toEqual([ids['c.pdf']]);
  });

  test("a public key without a customer token lists key uploads, not customers' (here: all three were key uploads)", async () => {
    const pk = await p.key(['files:list'], { kind: 'pk' });
    expect((await p.gql(pk, LIST, {})).data.files.edges).toHaveLength(3);
  });

  test('without the scope the field answers missing required scope (spec error table), not a pruned schema', async () => {
    const k = await p.key(['files:write']);
    const list = await p.gql(k, '{ files { edges { cursor } } }');
    expect(list.errors[0].message).toBe('missing required scope: files:list');
    expect(list.errors[0].extensions?.code).toBeUndefined();
    const one = await p.gql(k, '{ file(id: "x") { id } }');
    expect(one.errors[0].message).toBe('missing required scope: files:read');
    const reader = await p.key(['files:read']);
    const upload = await p.gql(
      reader,
      'mutation { createFileUpload(filename: "a.txt", contentType: "text/plain", size: 1) { fileId } }',
    );
    expect(upload.errors[0].message).toBe('missing required scope: files:write');
    const confirm = await p.gql(reader, 'mutation { confirmFileUpload(fileId: "x") { id } }');
    expect(confirm.errors[0].message).toBe('missing required scope: files:write');
    for (const m of ['deleteFile', 'restoreFile']) {
      const r = await p.gql(reader, `mutation { ${m}(id: "${ids['a.png']}") { id } }`);
      expect(r.errors[0].message).toBe('missing required scope: files:delete');
    }
    const gone = await p.gql(reader, `mutation { permanentlyDeleteFile(id: "${ids['a.png']}") }`);
    expect(gone.errors[0].message).toBe('missing required scope: files:delete');
    // Nothing was deleted.
    expect((await p.gql(reader, 'query($id: ID!) { file(id: $id) { id } }', { id: ids['a.png'] })).data.file.id).toBe(
      ids['a.png'],
    );
    // A public key: reads answer the scope; write fields stay absent (spec: write field on a public key).
    const pk = await p.key(['records:read'], { kind: 'pk' });
    expect((await p.gql(pk, '{ file(id: "x") { id } }')).errors[0].message).toBe('missing required scope: files:read');
    expect((await p.gql(pk, '{ files { edges { cursor } } }')).errors[0].message).toBe(
      'missing required scope: files:list',
    );
    for (const q of [
      'mutation { createFileUpload(filename: "a", contentType: "text/plain", size: 1) { fileId } }',
      'mutation { deleteFile(id: "x") { id } }',
    ]) {
      expect((await p.gql(pk, q)).errors[0].message).toStartWith('Cannot query field');
    }
  });

  test('the cost of a files listing follows its page size: a full page of every File field is served', async () => {
    const k = await p.key(['files:list']);
    const every =
      'id url filename contentType size width height alt folder sha256 createdAt deletedAt duration poster hls';
    for (const args of ['', '(first: 100)', '(first: $n)']) {
      const q = `query${args.includes('$n') ? '($n: Int)' : ''} { files${args} { edges { cursor node { ${every} } } pageInfo { hasNextPage endCursor } } }`;
      const r = await p.gql(k, q, { n: 100 });
      expect({ args, errors: r.errors }).toEqual({ args, errors: undefined });
      expect(r.data.files.edges).toHaveLength(3);
    }
  });

  test('a bad cursor is BAD_USER_INPUT', async () => {
    const r = await p.gql(await p.key(['files:list']), LIST, { after: 'nope' });
    expect(r.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    // A time JavaScript parses and PostgreSQL does not (it reached the database before: a 500).
    const far = Buffer.from('+275760-09-13T00:00:00.000Z|fil_x').toString('base64url');
    const r2 = await p.gql(await p.key(['files:list']), LIST, { after: far });
    expect(r2.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});
