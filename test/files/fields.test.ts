import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import sharp from 'sharp';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { form } from './support.ts';

/**
 * `image`, `video` and `file` record fields hold file ids and resolve to the uploaded file: an
 * image field keeps its alt text and focal point and its `url` takes transforms; writes naming a
 * file that is not a live file of this project (or not of the field's kind) are BAD_USER_INPUT.
 */
let server: TestServer;
let p: GqlProject;
let other: GqlProject;
let sk: string;
let img: { id: string; url: string };
let pdf: { id: string; url: string };
let foreign: { id: string };

const MODELS = [
  {
    key: 'article',
    name: 'Article',
    versioned: false,
    fields: [
      { key: 'title', type: 'text' },
      { key: 'hero', type: 'image' },
      { key: 'clip', type: 'video' },
      { key: 'doc', type: 'file' },
      { key: 'gallery', type: 'list', itemType: 'image' },
    ],
  },
] as any;

async function upload(project: GqlProject, key: string, bytes: Uint8Array, name: string) {
  const res = await fetch(`${server.apiUrl}/api/files/upload`, {
    method: 'POST',
    headers: { 'x-api-key': key },
    body: form({ file: [new Blob([bytes as Uint8Array<ArrayBuffer>]), name] }),
  });
  const body = (await res.json()) as any;
  if (res.status !== 201) throw new Error(JSON.stringify(body));
  return body;
}

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, MODELS, 'fields');
  other = await gqlProject(server, MODELS, 'fields-other');
  sk = await p.key('sk', [
    'records:read',
    'records:write',
    'records:publish',
    'files:write',
    'files:delete',
    'files:read',
  ]);
  const jpeg = new Uint8Array(
    await sharp({ create: { width: 640, height: 480, channels: 3, background: '#3366cc' } })
      .jpeg()
      .toBuffer(),
  );
  img = await upload(p, sk, jpeg, 'hero.jpg');
  pdf = await upload(p, sk, new TextEncoder().encode('%PDF-1.4\n%%EOF\n'), 'spec.pdf');
  foreign = await upload(other, await other.key('sk', ['files:write']), jpeg, 'theirs.jpg');
}, 30_000);

afterAll(async () => {
  await server.stop();
});

const SELECT = `_id hero { fileId alt focalPoint { x y } url width height mimeType small: url(w: 320, h: 200, format: webp) file { id filename size } }
  doc { fileId url name size mimeType } gallery { fileId url(w: 100) }`;

describe('file fields', () => {
  test('an image field resolves to its file, with alt, focal point and transform URLs', async () => {
    const r = await p.gql(sk, `mutation($d: ArticleInput!) { createArticle(data: $d) { ${SELECT} } }`, {
      d: {
        title: 'T',
        hero: { fileId: img.id, alt: 'Blue', focalPoint: { x: 0.25, y: 0.75 } },
        doc: { fileId: pdf.id },
        gallery: [{ fileId: img.id }],
      },
    });
    expect(r.body.errors).toBeUndefined();
    const a = r.body.data.createArticle;
    expect(a.hero).toMatchObject({
      fileId: img.id,
      alt: 'Blue',
      focalPoint: { x: 0.25, y: 0.75 },
      url: img.url,
      width: 640,
      height: 480,
      mimeType: 'image/jpeg',
      file: { id: img.id, filename: 'hero.jpg' },
    });
    expect(a.hero.small).toBe(`${img.url}?w=320&h=200&format=webp&fp=0.25%2C0.75`);
    expect(a.doc).toMatchObject({ fileId: pdf.id, url: pdf.url, name: 'spec.pdf', mimeType: 'application/pdf' });
    expect(a.gallery).toEqual([{ fileId: img.id, url: `${img.url}?w=100` }]);
    const small = await fetch(a.hero.small);
    expect(small.status).toBe(200);
    expect(await sharp(new Uint8Array(await small.arrayBuffer())).metadata()).toMatchObject({
      format: 'webp',
      width: 320,
      height: 200,
    });
    const read = await p.gql(sk, `query($id: ID!) { article(_id: $id) { ${SELECT} } }`, { id: a._id });
    expect(read.body.data.article).toEqual(a);
  });

  test('a batch of creates checks every file (a bare file id is accepted as the value)', async () => {
    const B = 'mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }';
    const ok = await p.gql(sk, B, {
      ops: [
        { action: 'CREATE', modelKey: 'article', data: { doc: pdf.id } },
        { action: 'CREATE', modelKey: 'article', data: { hero: { fileId: img.id } } },
      ],
    });
    expect(ok.body.errors).toBeUndefined();
    const bad = await p.gql(sk, B, {
      ops: [
        { action: 'CREATE', modelKey: 'article', data: { doc: pdf.id } },
        { action: 'CREATE', modelKey: 'article', data: { hero: { fileId: foreign.id } } },
      ],
    });
    expect(bad.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  test.each([
    ["another project's file", () => ({ hero: { fileId: foreign.id } }), 'hero'],
    ['an unknown file', () => ({ doc: { fileId: 'file_000000000000000000000000' } }), 'doc'],
    ['a PDF in an image field', () => ({ hero: { fileId: pdf.id } }), 'hero'],
    ['a PDF in a list of images', () => ({ gallery: [{ fileId: img.id }, { fileId: pdf.id }] }), 'gallery.1'],
    ['not a file id', () => ({ hero: { fileId: '../etc/passwd' } }), 'hero.fileId'],
    [
      'a focal point outside the image',
      () => ({ hero: { fileId: img.id, focalPoint: { x: 2, y: 0 } } }),
      'hero.focalPoint',
    ],
  ])('%s is BAD_USER_INPUT naming the field, nothing written', async (_n, data, field) => {
    const before = await p.gql(sk, '{ articles { totalCount } }');
    const r = await p.gql(sk, 'mutation($d: ArticleInput!) { createArticle(data: $d) { _id } }', { d: data() });
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toContain(`"${field}`);
    const after = await p.gql(sk, '{ articles { totalCount } }');
    expect(after.body.data.articles.totalCount).toBe(before.body.data.articles.totalCount);
  });

  test('an update naming a soft-deleted file is refused; a record whose file is deleted later reads file: null', async () => {
    const f = await upload(
      p,
      sk,
      new Uint8Array(
        await sharp({ create: { width: 20, height: 20, channels: 3, background: '#000' } })
          .png()
          .toBuffer(),
      ),
      'gone.png',
    );
    const c = await p.gql(sk, 'mutation($d: ArticleInput!) { createArticle(data: $d) { _id } }', {
      d: { hero: { fileId: f.id, alt: 'x' } },
    });
    const id = c.body.data.createArticle._id;
    await p.gql(sk, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: f.id });
    const read = await p.gql(sk, 'query($id: ID!) { article(_id: $id) { hero { fileId alt url file { id } } } }', {
      id,
    });
    expect(read.body.data.article.hero).toEqual({ fileId: f.id, alt: 'x', url: null, file: null });
    const u = await p.gql(sk, 'mutation($id: ID!, $d: ArticleInput!) { updateArticle(_id: $id, data: $d) { _id } }', {
      id,
      d: { hero: { fileId: f.id } },
    });
    expect(u.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  test('external assets written as URLs still read as written', async () => {
    const r = await p.gql(
      sk,
      'mutation { createArticle(data: { hero: { url: "https://cdn.example/a.png", alt: "A", width: 10 } }) { hero { url alt width fileId file { id } } } }',
    );
    expect(r.body.data.createArticle.hero).toEqual({
      url: 'https://cdn.example/a.png',
      alt: 'A',
      width: 10,
      fileId: null,
      file: null,
    });
  });
});
