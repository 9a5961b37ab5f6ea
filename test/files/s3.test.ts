import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { startTestServer, type TestServer } from '../support/server.ts';
import { startS3, type TestS3 } from '../support/s3.ts';
import { filesProject, form, png, type FilesProject } from './support.ts';

/**
 * The S3 backend (SVC_S3_URL) against a real S3-compatible server (s3rver): uploads land in the
 * bucket once per content, delivery streams from it (Range included), transforms read from it,
 * two-step uploads PUT straight to the bucket with a presigned URL, permanent delete empties it.
 */
setDefaultTimeout(60_000);
let s3: TestS3;
let server: TestServer;
let p: FilesProject;
let key: string;

const keys = async (prefix: string) => ((await s3.client.list({ prefix })).contents ?? []).map((c) => c.key);
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  s3 = await startS3();
  server = await startTestServer({ SVC_S3_URL: s3.url });
  p = await filesProject(server, 's3');
  key = await p.key(['files:write', 'files:read', 'files:delete']);
});

afterAll(async () => {
  await server?.stop();
  await s3?.stop();
});

describe('S3 storage', () => {
  test('a multipart upload is stored in the bucket once per content and served from it, Range included', async () => {
    const bytes = png(40, 30, 9);
    const a = await p.upload(key, form({ file: [new Blob([bytes]), 'a.png'] }));
    const b = await p.upload(key, form({ file: [new Blob([bytes]), 'b.png'] }));
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(await keys('blobs/')).toEqual([`blobs/${sha(bytes).slice(0, 2)}/${sha(bytes)}`]);
    const res = await fetch(a.body.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(`"${sha(bytes)}"`);
    expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
    const part = await fetch(b.body.url, { headers: { range: 'bytes=1-3' } });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).toString('hex')).toBe(
      Buffer.from(bytes.subarray(1, 4)).toString('hex'),
    );
  });

  test('a transform reads the original from the bucket and stores its variant there', async () => {
    const bytes = new Uint8Array(
      await sharp({ create: { width: 300, height: 200, channels: 3, background: '#808000' } })
        .png()
        .toBuffer(),
    );
    const f = (await p.upload(key, form({ file: [new Blob([bytes]), 'olive.png'] }))).body;
    const res = await fetch(`${f.url}?w=150&format=webp`);
    expect(res.status).toBe(200);
    expect(await sharp(new Uint8Array(await res.arrayBuffer())).metadata()).toMatchObject({
      format: 'webp',
      width: 150,
      height: 100,
    });
    expect((await keys(`derived/${sha(bytes)}/`)).some((k) => k.endsWith('.webp'))).toBe(true);
    await p.gql(key, 'mutation($id: ID!) { permanentlyDeleteFile(id: $id) }', { id: f.id });
    expect(await keys(`derived/${sha(bytes)}/`)).toEqual([]);
    expect(await keys(`blobs/${sha(bytes).slice(0, 2)}/${sha(bytes)}`)).toEqual([]);
    expect((await fetch(f.url)).status).toBe(404);
  });

  test('two-step: the upload URL is a presigned PUT to the bucket; confirm moves it under its hash', async () => {
    const bytes = png(9, 4, 3);
    const r = await p.gql(
      key,
      'mutation($s: Int!) { createFileUpload(filename: "d.png", contentType: "image/png", size: $s) { fileId uploadUrl headers } }',
      { s: bytes.length },
    );
    const t = r.data.createFileUpload;
    expect(t.uploadUrl.startsWith(`${s3.endpoint}/${s3.bucket}/staged/${t.fileId}?`)).toBe(true);
    expect(t.uploadUrl).toContain('X-Amz-Signature=');
    const put = await fetch(t.uploadUrl, { method: 'PUT', body: bytes, headers: t.headers });
    expect(put.status).toBe(200);
    const c = await p.gql(key, 'mutation($id: ID!) { confirmFileUpload(fileId: $id) { id width height url } }', {
      id: t.fileId,
    });
    expect(c.data.confirmFileUpload).toMatchObject({ id: t.fileId, width: 9, height: 4 });
    expect(await keys('staged/')).toEqual([]);
    expect(
      Buffer.from(await (await fetch(c.data.confirmFileUpload.url)).arrayBuffer()).equals(Buffer.from(bytes)),
    ).toBe(true);
  });

  test('two-step: a PUT of another size than declared is refused at confirm and removed from the bucket', async () => {
    const bytes = png(9, 4, 4);
    const t = (
      await p.gql(
        key,
        'mutation($s: Int!) { createFileUpload(filename: "e.png", contentType: "image/png", size: $s) { fileId uploadUrl } }',
        { s: bytes.length },
      )
    ).data.createFileUpload;
    expect((await fetch(t.uploadUrl, { method: 'PUT', body: new Uint8Array(bytes.length * 3) })).status).toBe(200);
    const c = await p.gql(key, 'mutation($id: ID!) { confirmFileUpload(fileId: $id) { id } }', { id: t.fileId });
    expect(c.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(await keys('staged/')).toEqual([]);
  });
});
