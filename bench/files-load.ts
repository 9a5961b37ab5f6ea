/**
 * Load generator of the `files` scenario (its own process): uploads COUNT images of the given
 * bytes (each made distinct by 16 bytes after the image) at CONCURRENCY, as browsers send them
 * (fetch + FormData), to the service and to the reference; then GETs the cached variant URL and
 * the static reference for DURATION seconds each with CONNECTIONS keep-alive loops. Prints one
 * line `FILESJSON {...}`.
 */
import { readFileSync } from 'node:fs';

interface Cfg {
  image: string;
  count: number;
  concurrency: number;
  connections: number;
  duration: number;
  service: { upload: string; apiKey: string; variant: string };
  reference: { upload: string; static: string };
}
const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Cfg;
const image = new Uint8Array(readFileSync(cfg.image));

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

async function uploads(url: string, headers: Record<string, string>, tag: string) {
  const lat: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: cfg.concurrency }, async () => {
      for (let i = next++; i < cfg.count; i = next++) {
        const bytes = new Uint8Array(image.length + 16);
        bytes.set(image);
        bytes.set(new TextEncoder().encode(`${tag}${String(i).padStart(12, '0')}`.slice(0, 16)), image.length);
        const body = new FormData();
        body.append('file', new Blob([bytes], { type: 'image/png' }), `bench-${i}.png`);
        const s = performance.now();
        const res = await fetch(url, { method: 'POST', headers, body });
        await res.arrayBuffer();
        lat.push(performance.now() - s);
        if (res.status !== 201) {
          errors++;
          firstError ??= `HTTP ${res.status}`;
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const mb = (cfg.count * (image.length + 16)) / 1e6;
  return {
    requests: cfg.count,
    seconds,
    rps: cfg.count / seconds,
    mbps: mb / seconds,
    p50: pct(lat, 50),
    p99: pct(lat, 99),
    errors,
    firstError,
  };
}

async function gets(url: string) {
  const lat: number[] = [];
  let errors = 0;
  const end = performance.now() + cfg.duration * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: cfg.connections }, async () => {
      while (performance.now() < end) {
        const s = performance.now();
        const res = await fetch(url);
        await res.arrayBuffer();
        lat.push(performance.now() - s);
        if (res.status !== 200) errors++;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { requests: lat.length, seconds, rps: lat.length / seconds, p50: pct(lat, 50), p99: pct(lat, 99), errors };
}

const out = {
  upload: await uploads(cfg.service.upload, { 'x-api-key': cfg.service.apiKey }, 's'),
  uploadRef: await uploads(cfg.reference.upload, {}, 'r'),
  variant: await gets(cfg.service.variant),
  staticRef: await gets(cfg.reference.static),
  variantAgain: await gets(cfg.service.variant),
  staticRefAgain: await gets(cfg.reference.static),
};
console.log(`FILESJSON ${JSON.stringify(out)}`);
