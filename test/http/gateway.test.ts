import { describe, expect, test } from 'bun:test';
import { startGateway, UPGRADED, type GatewayModule } from '../../src/http/gateway.ts';

/** Two modules share one listener: each answers its routes and gets only its own sockets. */
function echo(name: string, prefix: string): GatewayModule {
  return {
    name,
    fetch(req, url, server) {
      if (!url.pathname.startsWith(prefix)) return undefined;
      if (req.headers.get('upgrade') === 'websocket')
        return server.upgrade(req, { data: { kind: name } }) ? UPGRADED : new Response('no', { status: 400 });
      return new Response(`${name} http`);
    },
    websocket: {
      message(ws, m) {
        ws.send(`${name}:${m}`);
      },
    },
  };
}

describe('gateway modules', () => {
  test('routes and WebSocket messages go to the module that owns them', async () => {
    const gw = startGateway({ port: 0, hostname: '127.0.0.1' }, [echo('a', '/a'), echo('b', '/b')]);
    try {
      const base = `127.0.0.1:${gw.server.port}`;
      expect(await (await fetch(`http://${base}/b/x`)).text()).toBe('b http');
      expect((await fetch(`http://${base}/health`)).status).toBe(200);
      expect((await fetch(`http://${base}/c`)).status).toBe(404);
      for (const name of ['a', 'b']) {
        const ws = new WebSocket(`ws://${base}/${name}`);
        const got = new Promise<string>((resolve) => (ws.onmessage = (e) => resolve(String(e.data))));
        ws.onopen = () => ws.send('hi');
        expect(await got).toBe(`${name}:hi`);
        ws.close();
      }
    } finally {
      await gw.stop();
    }
  });
});
