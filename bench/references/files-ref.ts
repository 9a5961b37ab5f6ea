/**
 * References for the `files` bench scenario, in their own process: the ceiling of what Bun alone
 * does with the same bytes, without svc's auth, sniffing, database rows or transforms.
 *
 * - `POST /upload`: a multipart body read with `request.formData()`, SHA-256 of the file, written
 *   to a temp folder with Bun.write (what an upload needs at the least).
 * - `GET /static`: `Bun.file(STATIC_FILE)` (the cached variant's bytes) as a static server.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'svc-bench-files-ref-'));
const staticFile = process.env.STATIC_FILE!;
let n = 0;

Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  async fetch(req) {
    const url = new URL(req.url);
    if (req.method === 'POST' && url.pathname === '/upload') {
      const form = await req.formData();
      const file = form.get('file');
      if (!(file instanceof Blob)) return new Response('no file', { status: 400 });
      const bytes = new Uint8Array(await file.arrayBuffer());
      const sha = new Bun.CryptoHasher('sha256').update(bytes).digest('hex');
      await Bun.write(join(dir, `${n++}-${sha}`), bytes);
      return Response.json({ sha256: sha, size: bytes.length }, { status: 201 });
    }
    if (url.pathname === '/static')
      return new Response(Bun.file(staticFile), {
        headers: { 'content-type': 'image/webp', 'cache-control': 'public, max-age=31536000, immutable' },
      });
    return new Response('ready');
  },
});
