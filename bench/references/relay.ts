/**
 * The fan-out ceiling (bench fanout-sse / fanout-ws): a bare Bun.serve pub/sub relay with no
 * database, no auth and no channels. POST /publish relays the body to every WebSocket of one
 * topic (uWebSockets publish) and, as an SSE frame encoded once, to every stream.
 */
const enc = new TextEncoder();
const streams = new Set<ReadableStreamDefaultController<Uint8Array>>();
let seq = 0;

Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  idleTimeout: 0,
  async fetch(req, server) {
    const url = new URL(req.url);
    if (url.pathname === '/health') return new Response('ok');
    if (url.pathname === '/ws')
      return server.upgrade(req) ? undefined : new Response('upgrade failed', { status: 400 });
    if (url.pathname === '/sse') {
      let ctl!: ReadableStreamDefaultController<Uint8Array>;
      const stream = new ReadableStream<Uint8Array>({
        start(c) {
          ctl = c;
          c.enqueue(enc.encode('event: connected\ndata: {}\n\n'));
          streams.add(c);
        },
        cancel() {
          streams.delete(ctl);
        },
      });
      return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
    }
    if (url.pathname === '/publish' && req.method === 'POST') {
      const text = await req.text();
      server.publish('t', text);
      const bytes = enc.encode(`id: ${++seq}\ndata: ${text}\n\n`);
      for (const c of streams) c.enqueue(bytes);
      return new Response('ok');
    }
    return new Response('not found', { status: 404 });
  },
  websocket: {
    open(ws) {
      ws.subscribe('t');
    },
    message() {},
  },
});
console.log('relay ready');
