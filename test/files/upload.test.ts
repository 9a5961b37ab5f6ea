import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, form, png, type FilesProject } from './support.ts';

/**
 * `POST /api/files/upload` as a browser sends it (fetch + FormData) and GET of the answered URL:
 * sniffed types, dimensions, dedup by SHA-256, the refusals of issue 17, and no temp file left.
 */
const LIMIT = 200_000;
let server: TestServer;
let p: FilesProject;
let writer: string;

beforeAll(async () => {
  server = await startTestServer({ SVC_FILES_MAX_BYTES: String(LIMIT) });
  p = await filesProject(server);
  writer = await p.key(['files:write', 'files:read']);
}, 30_000);

afterAll(async () => {
  await server.stop();
});

const hex = (b: ArrayBuffer | Uint8Array) => Buffer.from(b as Uint8Array).toString('hex');
const tmpDir = () => join(server.dataDir, 'files', 'tmp');
const tempsLeft = () => (existsSync(tmpDir()) ? readdirSync(tmpDir()).length : 0);
const blobOf = (sha: string) => join(server.dataDir, 'files', sha.slice(0, 2), sha.slice(2, 4), sha);

describe('upload', () => {
  test('a PNG comes back as a file object with its sniffed type and dimensions, served from its URL', async () => {
    const bytes = png(3, 2);
    // The client claims text/plain; the bytes say PNG.
    const r = await p.upload(
      writer,
      form({ file: [new Blob([bytes], { type: 'text/plain' }), 'cat.png'], alt: 'A cat', folder: 'pets/cats' }),
    );
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      filename: 'cat.png',
      contentType: 'image/png',
      size: bytes.length,
      width: 3,
      height: 2,
      alt: 'A cat',
      folder: 'pets/cats',
    });
    expect(r.body.id).toMatch(/^file_/);
    expect(new Date(r.body.createdAt).getTime()).toBeGreaterThan(Date.now() - 60_000);
    const res = await fetch(r.body.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(hex(await res.arrayBuffer())).toBe(hex(bytes));
    expect(res.headers.get('etag')).toBe(`"${createHash('sha256').update(bytes).digest('hex')}"`);
    expect(Date.parse(res.headers.get('last-modified')!)).toBeLessThanOrEqual(Date.now());
  });

  test('ETag and Last-Modified revalidate to 304; Range answers 206 with the slice', async () => {
    const bytes = png(10, 10, 3);
    const r = await p.upload(writer, form({ file: [new Blob([bytes]), 'a.png'] }));
    const first = await fetch(r.body.url);
    await first.arrayBuffer();
    const etag = first.headers.get('etag')!;
    expect((await fetch(r.body.url, { headers: { 'if-none-match': etag } })).status).toBe(304);
    expect(
      (await fetch(r.body.url, { headers: { 'if-modified-since': first.headers.get('last-modified')! } })).status,
    ).toBe(304);
    const part = await fetch(r.body.url, { headers: { range: 'bytes=8-15' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 8-15/${bytes.length}`);
    expect(hex(await part.arrayBuffer())).toBe(hex(bytes.subarray(8, 16)));
    const tail = await fetch(r.body.url, { headers: { range: 'bytes=-4' } });
    expect(hex(await tail.arrayBuffer())).toBe(hex(bytes.subarray(bytes.length - 4)));
    const none = await fetch(r.body.url, { headers: { range: `bytes=${bytes.length}-` } });
    expect(none.status).toBe(416);
    expect(none.headers.get('content-range')).toBe(`bytes */${bytes.length}`);
  });

  test('identical bytes are stored once however many files name them', async () => {
    const bytes = png(5, 5, 9);
    const sha = createHash('sha256').update(bytes).digest('hex');
    const a = await p.upload(writer, form({ file: [new Blob([bytes]), 'one.png'] }));
    const b = await p.upload(writer, form({ file: [new Blob([bytes]), 'two.png'] }));
    expect(a.body.id).not.toBe(b.body.id);
    expect(readdirSync(join(blobOf(sha), '..'))).toEqual([sha]);
    expect(hex(await (await fetch(b.body.url)).arrayBuffer())).toBe(hex(bytes));
  });

  test('a path-traversal filename is reduced to its last segment and stored under the hash', async () => {
    const r = await p.upload(writer, form({ file: [new Blob([png(2, 2, 1)]), '../../../etc/passwd.png'] }));
    expect(r.status).toBe(201);
    expect(r.body.filename).toBe('passwd.png');
    expect(new URL(r.body.url).pathname).toBe(`/api/files/${r.body.id}/passwd.png`);
    expect(existsSync(join(server.dataDir, '..', 'etc'))).toBe(false);
  });

  test('a PDF is sniffed as application/pdf with no dimensions', async () => {
    const pdf = new TextEncoder().encode('%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n');
    const r = await p.upload(writer, form({ file: [new Blob([pdf], { type: 'image/png' }), 'doc.pdf'] }));
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ contentType: 'application/pdf', width: null, height: null });
    const res = await fetch(r.body.url);
    expect(res.headers.get('content-disposition')).toStartWith('attachment');
  });
});

describe('refusals leave nothing stored', () => {
  const countRows = async () =>
    Number(
      (
        await server.svc.sql<{ n: number }[]>`select count(*)::int as n from files where project_id = ${p.projectId}`
      )[0]!.n,
    );

  test.each([
    ['no file field', () => form({ alt: 'x' }), 400, 'BAD_USER_INPUT'],
    ['zero bytes', () => form({ file: [new Blob([]), 'empty.png'] }), 400, 'BAD_USER_INPUT'],
    [
      'a PNG header on an HTML payload',
      () =>
        form({
          file: [
            new Blob([new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]), '<html><script>alert(1)</script></html>']),
            'x.png',
          ],
        }),
      400,
      'BAD_USER_INPUT',
    ],
    [
      'a file over the limit',
      () => form({ file: [new Blob([new Uint8Array(LIMIT + 100_000)]), 'big.bin'] }),
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    ['a bad folder', () => form({ file: [new Blob([png(1, 1)]), 'a.png'], folder: '../up' }), 400, 'BAD_USER_INPUT'],
  ] as const)('%s', async (_name, body, status, code) => {
    const before = await countRows();
    const r = await p.upload(writer, body());
    expect(r.status).toBe(status);
    expect(r.body.error).toBe(code);
    expect(typeof r.body.message).toBe('string');
    expect(await countRows()).toBe(before);
    expect(tempsLeft()).toBe(0);
  });

  test('a chunked body (no Content-Length) over the limit is refused while streaming', async () => {
    const before = await countRows();
    const boundary = '----svcboundary';
    let sent = 0;
    const enc = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(
          enc.encode(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
          ),
        );
      },
      pull(c) {
        // Far more than the limit is on offer; the server must stop reading near the limit.
        if (sent > LIMIT * 50) return c.close();
        sent += 16_384;
        c.enqueue(new Uint8Array(16_384));
      },
    });
    const res = await fetch(`${server.apiUrl}/api/files/upload`, {
      method: 'POST',
      headers: { 'x-api-key': writer, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error).toBe('PAYLOAD_TOO_LARGE');
    expect(sent).toBeLessThan(LIMIT * 50);
    expect(await countRows()).toBe(before);
    expect(tempsLeft()).toBe(0);
  });

  test("a type outside the key's allowedFileTypes is refused; image/* admits a PNG", async () => {
    const imagesOnly = await p.key(['files:write'], { allowedFileTypes: ['image/*'] });
    const pdf = new TextEncoder().encode('%PDF-1.4\n%%EOF\n');
    const no = await p.upload(imagesOnly, form({ file: [new Blob([pdf]), 'doc.pdf'] }));
    expect(no.status).toBe(403);
    expect(no.body.error).toBe('PERMISSION_DENIED');
    expect(tempsLeft()).toBe(0);
    expect((await p.upload(imagesOnly, form({ file: [new Blob([png(4, 4)]), 'ok.png'] }))).status).toBe(201);
  });

  test('files:write is required; no key is unauthenticated', async () => {
    const reader = await p.key(['files:read']);
    const r = await p.upload(reader, form({ file: [new Blob([png(1, 1)]), 'a.png'] }));
    expect(r.status).toBe(403);
    expect(r.body.message).toBe('missing required scope: files:write');
    const anon = await fetch(`${server.apiUrl}/api/files/upload`, {
      method: 'POST',
      body: form({ file: [new Blob([png(1, 1)]), 'a.png'] }),
    });
    expect(anon.status).toBe(401);
  });

  test('a body that is not multipart is a 400', async () => {
    const res = await fetch(`${server.apiUrl}/api/files/upload`, {
      method: 'POST',
      headers: { 'x-api-key': writer, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toBe('BAD_USER_INPUT');
  });

  test('an unknown file URL is a 404', async () => {
    const res = await fetch(`${server.apiUrl}/api/files/file_000000000000000000000000/x.png`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error).toBe('NOT_FOUND');
  });
});
