/**
 * The `operations` scenario's endpoint: answers every POST at once with a small JSON body and
 * notes when each execution's call arrived (`GET /stats` hands the times over and forgets them).
 * Times are `performance.timeOrigin + performance.now()`, comparable across local processes.
 * Env: PORT.
 */
const received = new Map<string, number>();
Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  async fetch(req) {
    if (req.method === 'GET') {
      const out = Object.fromEntries(received);
      received.clear();
      return Response.json(out);
    }
    const now = performance.timeOrigin + performance.now();
    const id = req.headers.get('x-svc-execution-id');
    await req.arrayBuffer();
    if (id) received.set(id, now);
    return new Response('{"ok":true}', { headers: { 'content-type': 'application/json' } });
  },
});
console.log('ready');
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(0));
