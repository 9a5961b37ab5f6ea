import { mkdtempSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { freePort } from '../src/store/ports.ts';
import { rssWindow, startChild, waitHttp } from './procs.ts';
import type { Row } from './report.ts';
import type { Seeded } from './seed.ts';
import type { Target } from './targets.ts';

/**
 * Scenario `files` (issue 17): `BENCH_FILES_COUNT` (1,000) uploads of distinct 200 KB PNGs at
 * concurrency 8 through `POST /api/files/upload` (MB/s, p50/p99), beside a bare Bun multipart
 * server that hashes and writes the same bodies (`files-upload/bun`); then GETs of one cached
 * `w=400&format=webp` variant at `BENCH_CONNECTIONS` (32) connections, beside a Bun.file static
 * server of the same variant bytes (`files-webp/static`). The references run twice, before and
 * after, on the shared box. The load comes from bench/files-load.ts in its own process.
 */
const COUNT = Number(process.env.BENCH_FILES_COUNT || 1000);

export async function runFiles(svc: Target, s: Seeded, quick: boolean): Promise<{ rows: Row[]; notes: string[] }> {
  process.stderr.write(`bench: files (${COUNT} uploads of 200 KB, cached webp variant) … `);
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-files-'));
  // 512 × 130 RGB noise, stored PNG: about 200 KB that no codec can shrink.
  const png = await sharp(randomBytes(512 * 130 * 3), { raw: { width: 512, height: 130, channels: 3 } })
    .png({ compressionLevel: 0 })
    .toBuffer();
  const imagePath = join(dir, 'image.png');
  writeFileSync(imagePath, png);
  // Preflight: one upload and its variant through the service.
  const form = new FormData();
  form.append('file', new Blob([png], { type: 'image/png' }), 'probe.png');
  const up = await fetch(`${svc.url}/api/files/upload`, {
    method: 'POST',
    headers: { 'x-api-key': s.secretKey },
    body: form,
  });
  const file = (await up.json()) as { url?: string; error?: string };
  if (up.status !== 201 || !file.url)
    throw new Error(`preflight upload: HTTP ${up.status} ${JSON.stringify(file).slice(0, 120)}`);
  const variant = `${svc.url}${new URL(file.url).pathname}?w=400&format=webp`;
  const v = await fetch(variant);
  if (v.status !== 200) throw new Error(`preflight variant: HTTP ${v.status}`);
  const variantPath = join(dir, 'variant.webp');
  writeFileSync(variantPath, new Uint8Array(await v.arrayBuffer()));
  const port = await freePort();
  const ref = startChild(process.execPath, [join(import.meta.dir, 'references', 'files-ref.ts')], {
    label: 'files-ref',
    env: { PORT: String(port), STATIC_FILE: variantPath },
  });
  try {
    await waitHttp(`http://127.0.0.1:${port}/`, ref);
    const cfgPath = join(dir, 'files.json');
    const connections = Number(process.env.BENCH_CONNECTIONS || 32);
    const duration = Number(process.env.BENCH_DURATION || (quick ? 3 : 10));
    writeFileSync(
      cfgPath,
      JSON.stringify({
        image: imagePath,
        count: COUNT,
        concurrency: 8,
        connections,
        duration,
        service: { upload: `${svc.url}/api/files/upload`, apiKey: s.secretKey, variant },
        reference: { upload: `http://127.0.0.1:${port}/upload`, static: `http://127.0.0.1:${port}/static` },
      }),
    );
    const rss = rssWindow(svc.child.pid);
    const driver = startChild(process.execPath, [join(import.meta.dir, 'files-load.ts'), cfgPath], {
      label: 'files-load',
    });
    let out = '';
    driver.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => void driver.stop('SIGKILL', 0), 600_000);
    await new Promise<void>((r) => (driver.exited() ? r() : driver.proc.once('exit', () => r())));
    clearTimeout(timer);
    const rssMb = rss.end();
    const m = /FILESJSON (\{.*\})/.exec(out);
    if (!m) throw new Error(`bench/files-load.ts printed no result: ${driver.tail()}`);
    const r = JSON.parse(m[1]!);
    const refUp = Math.max(r.uploadRef.mbps, 1e-9);
    const stat = Math.max(r.staticRef.rps, r.staticRefAgain.rps);
    const served = Math.max(r.variant.rps, r.variantAgain.rps);
    process.stderr.write(
      `${r.upload.mbps.toFixed(1)} MB/s upload (Bun ref ${r.uploadRef.mbps.toFixed(1)}), ${served.toFixed(0)} variant req/s (static ${stat.toFixed(0)})\n`,
    );
    const notes = [
      `files: ${COUNT} uploads of ${(png.length / 1000).toFixed(0)} KB PNGs at concurrency 8: ${r.upload.mbps.toFixed(1)} MB/s (${r.upload.rps.toFixed(0)} uploads/s), p50 ${r.upload.p50.toFixed(1)} ms, p99 ${r.upload.p99.toFixed(1)} ms = ${(r.upload.mbps / refUp).toFixed(2)} × a bare Bun multipart server hashing and writing the same bodies (${r.uploadRef.mbps.toFixed(1)} MB/s, p99 ${r.uploadRef.p99.toFixed(1)} ms)${r.upload.errors ? `; ${r.upload.errors} failed (${r.upload.firstError})` : ''}`,
      `files: cached w=400&format=webp variant (${v.headers.get('content-length') ?? '?'} bytes) at ${connections} connections: ${r.variant.rps.toFixed(0)} then ${r.variantAgain.rps.toFixed(0)} req/s (p99 ${r.variant.p99.toFixed(1)} / ${r.variantAgain.p99.toFixed(1)} ms) = ${(served / stat).toFixed(2)} × Bun.file static serving of the same bytes (${r.staticRef.rps.toFixed(0)} then ${r.staticRefAgain.rps.toFixed(0)} req/s, run before and after); the service checks the file is live on each GET from a per-process row cache that deletes invalidate over the bus (src/files/live.ts); load from bench/files-load.ts (fetch loops) in its own process`,
    ];
    const row = (
      name: string,
      x: { requests: number; seconds: number; rps: number; p50: number; p99: number; errors: number },
      reference: boolean,
      rssMb?: number,
    ): Row => ({
      name,
      shape: 'files',
      reference,
      result: { requests: x.requests, seconds: x.seconds, rps: x.rps, p50: x.p50, p99: x.p99, errors: x.errors, rssMb },
    });
    return {
      notes,
      rows: [
        row('files-upload/bun', r.uploadRef, true),
        row('files-upload', r.upload, false, rssMb),
        row('files-webp/static', { ...r.staticRef, rps: stat }, true),
        row('files-webp', { ...r.variant, rps: served }, false, rssMb),
      ],
    };
  } finally {
    await ref.stop();
  }
}
