/**
 * ceiling-static: raw Bun.serve answering every request with the same response bytes the
 * service returns for the read document. The HTTP ceiling of this machine and runtime.
 * Env: PORT, BENCH_BODY_FILE.
 */
import { readFileSync } from 'node:fs';

const body = readFileSync(process.env.BENCH_BODY_FILE!);
Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  async fetch(req) {
    if (req.method === 'POST') await req.arrayBuffer();
    return new Response(body, { headers: { 'content-type': 'application/json' } });
  },
});
console.log('ready');
// Exit through process.exit so that --cpu-prof writes its profile.
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(0));
