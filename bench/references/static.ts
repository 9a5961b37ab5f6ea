/**
 * ceiling-static: raw Bun.serve answering every request with the same response the service
 * returns for the read document: its body, and its headers when the harness saved them beside
 * it (`<BENCH_BODY_FILE>.headers.json`: Cache-Control, Vary, the rate-limit headers). The HTTP
 * ceiling of this machine and runtime for that response.
 * Env: PORT, BENCH_BODY_FILE.
 */
import { existsSync, readFileSync } from 'node:fs';

const file = process.env.BENCH_BODY_FILE!;
const body = readFileSync(file);
const saved = `${file}.headers.json`;
const headers = new Headers(
  existsSync(saved)
    ? (JSON.parse(readFileSync(saved, 'utf8')) as [string, string][])
    : [['content-type', 'application/json']],
);
Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  async fetch(req) {
    if (req.method === 'POST') await req.arrayBuffer();
    return new Response(body, { headers });
  },
});
console.log('ready');
// Exit through process.exit so that --cpu-prof writes its profile.
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(0));
