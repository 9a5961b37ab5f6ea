import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, form, type FilesProject } from './support.ts';

/**
 * Image transforms on the file URL (`w`, `h`, `fit`, `format`, `q`, `fp`): the answered image has
 * the asked dimensions and format (read back with sharp), variants are generated once and kept,
 * and the refusals are 400s with a code.
 */
let server: TestServer;
let p: FilesProject;
let writer: string;
let photo: { id: string; url: string };

/** W×H RGB: the left half red, the right half blue (so a focal crop shows which side it kept). */
async function halves(W: number, H: number, format: 'png' | 'jpeg' = 'jpeg'): Promise<Uint8Array> {
  const raw = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) raw.set(x < W / 2 ? [230, 20, 20] : [20, 20, 230], (y * W + x) * 3);
  const img = sharp(raw, { raw: { width: W, height: H, channels: 3 } });
  return new Uint8Array(await (format === 'png' ? img.png() : img.jpeg({ quality: 90 })).toBuffer());
}

async function image(url: string) {
  const res = await fetch(url);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const meta = res.status === 200 ? await sharp(bytes).metadata() : null;
  return { res, bytes, meta };
}

beforeAll(async () => {
  server = await startTestServer({ SVC_FILES_MAX_INPUT_PIXELS: '4000000' });
  p = await filesProject(server, 'img');
  writer = await p.key(['files:write', 'files:read', 'files:delete']);
  const r = await p.upload(writer, form({ file: [new Blob([await halves(800, 600)]), 'photo.jpg'] }));
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  photo = r.body;
}, 30_000);

afterAll(async () => {
  await server.stop();
});

describe('transforms', () => {
  test('w=400&format=webp answers a 400×300 WebP, immutable, with its own ETag', async () => {
    const { res, meta } = await image(`${photo.url}?w=400&format=webp`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/webp');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(meta).toMatchObject({ format: 'webp', width: 400, height: 300 });
    const original = await fetch(photo.url);
    await original.arrayBuffer();
    const etag = res.headers.get('etag')!;
    expect(etag).not.toBe(original.headers.get('etag'));
    expect((await fetch(`${photo.url}?format=webp&w=400`, { headers: { 'if-none-match': etag } })).status).toBe(304);
  });

  test.each([
    ['w=200&h=200', 'jpeg', 200, 200],
    ['w=200&h=200&fit=contain&format=png', 'png', 200, 200],
    ['w=200&h=200&fit=inside', 'jpeg', 200, 150],
    ['w=200&h=200&fit=outside', 'jpeg', 267, 200],
    ['w=300&h=100&fit=fill&format=jpeg&q=40', 'jpeg', 300, 100],
    ['h=60&format=avif', 'heif', 80, 60],
  ])('%s → %s %i×%i', async (query, format, w, h) => {
    const { res, meta } = await image(`${photo.url}?${query}`);
    expect(res.status).toBe(200);
    expect(meta).toMatchObject({ format, width: w, height: h });
  });

  test('a focal point decides what a cover crop keeps', async () => {
    const colourAt = async (fp: string) => {
      const { bytes } = await image(`${photo.url}?w=100&h=600&fit=cover&fp=${fp}&format=png`);
      const { data } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
      return [data[0]!, data[2]!] as const;
    };
    const [r1, b1] = await colourAt('0.95,0.5');
    expect(b1).toBeGreaterThan(r1);
    const [r2, b2] = await colourAt('0.05,0.5');
    expect(r2).toBeGreaterThan(b2);
  });

  test('a variant is generated once, stored beside its blob, and shared by concurrent requests', async () => {
    const before = server.svc.files.images.generated;
    const url = `${photo.url}?w=123&format=webp&q=61`;
    const all = await Promise.all(Array.from({ length: 12 }, () => image(url)));
    expect(all.every((a) => a.res.status === 200 && a.meta?.width === 123)).toBe(true);
    expect(new Set(all.map((a) => Buffer.from(a.bytes).toString('base64'))).size).toBe(1);
    expect(server.svc.files.images.generated - before).toBe(1);
    await image(url);
    expect(server.svc.files.images.generated - before).toBe(1);
    const sha = (await p.gql(writer, 'query($id: ID!) { file(id: $id) { sha256 } }', { id: photo.id })).data.file
      .sha256;
    const derived = join(server.dataDir, 'files', 'derived', sha.slice(0, 2), sha);
    expect(readdirSync(derived).some((n) => n.endsWith('.webp'))).toBe(true);
    const metrics = await (await fetch(`${server.apiUrl}/metrics`)).text();
    expect(Number(/^svc_files_variants_generated (\d+)$/m.exec(metrics)?.[1])).toBe(server.svc.files.images.generated);
    expect(Number(/^svc_files_variant_cache_bytes (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
  });

  test('a soft-deleted file answers 404 for its variants too; permanent delete removes them', async () => {
    const bytes = await halves(64, 48, 'png');
    const f = (await p.upload(writer, form({ file: [new Blob([bytes]), 'x.png'] }))).body;
    expect((await image(`${f.url}?w=32&format=webp`)).res.status).toBe(200);
    const sha = (await p.gql(writer, 'query($id: ID!) { file(id: $id) { sha256 } }', { id: f.id })).data.file.sha256;
    await p.gql(writer, 'mutation($id: ID!) { deleteFile(id: $id) { id } }', { id: f.id });
    expect((await fetch(`${f.url}?w=32&format=webp`)).status).toBe(404);
    await p.gql(writer, 'mutation($id: ID!) { permanentlyDeleteFile(id: $id) }', { id: f.id });
    expect(existsSync(join(server.dataDir, 'files', 'derived', sha.slice(0, 2), sha))).toBe(false);
  });
});

describe('refusals', () => {
  test.each([
    ['w=100000', 'over the per-side limit'],
    ['w=8000&h=8000', 'over the output pixel cap'],
    ['w=abc', 'not a number'],
    ['w=0', 'zero'],
    ['format=bmp', 'an unknown format'],
    ['fit=crop', 'an unknown fit'],
    ['q=0', 'a quality out of range'],
    ['w=10&h=10&fp=2,2', 'a focal point outside the image'],
  ])('%s (%s) is 400 BAD_USER_INPUT', async (query) => {
    const derived = () =>
      existsSync(join(server.dataDir, 'files', 'derived'))
        ? readdirSync(join(server.dataDir, 'files', 'derived'), { recursive: true }).length
        : 0;
    const before = derived();
    const res = await fetch(`${photo.url}?${query}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.error).toBe('BAD_USER_INPUT');
    expect(typeof body.message).toBe('string');
    // Nothing generated or kept for a refused transform.
    expect(derived()).toBe(before);
    const tmp = join(server.dataDir, 'files', 'tmp');
    expect(existsSync(tmp) ? readdirSync(tmp) : []).toEqual([]);
  });

  test('a transform of a PDF is 400', async () => {
    const pdf = (
      await p.upload(writer, form({ file: [new Blob([new TextEncoder().encode('%PDF-1.4\n%%EOF\n')]), 'a.pdf'] }))
    ).body;
    const res = await fetch(`${pdf.url}?w=10`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toBe('BAD_USER_INPUT');
  });

  test('a decompression bomb (a small PNG whose header says 100,000 × 100,000) is refused at upload, nothing kept', async () => {
    const bomb = Buffer.from(await halves(10, 10, 'png'));
    bomb.writeUInt32BE(100_000, 16);
    bomb.writeUInt32BE(100_000, 20);
    bomb.writeUInt32BE(Bun.hash.crc32(bomb.subarray(12, 29)), 29);
    const rows = async () =>
      (
        await server.svc.sql<{ n: number }[]>`select count(*)::int as n from files where project_id = ${p.projectId}`
      )[0]!.n;
    const before = await rows();
    const r = await p.upload(writer, form({ file: [new Blob([bomb]), 'bomb.png'] }));
    expect(r.status).toBe(400);
    expect(await rows()).toBe(before);
    expect(r.body.error).toBe('BAD_USER_INPUT');
    expect(r.body.limit).toBe(4_000_000);
    const tmp = join(server.dataDir, 'files', 'tmp');
    expect(existsSync(tmp) ? readdirSync(tmp) : []).toEqual([]);
  });
});
