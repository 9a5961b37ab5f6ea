import { readFileSync } from 'node:fs';
import type { Server } from 'bun';
import { removeTempDir, tempDir } from '../support/tmp.ts';
import { selfSignedCert } from '../support/tls.ts';

/** A local https server with a throw-away self-signed certificate (openssl), for manifest fetches. */
export interface HttpsSite {
  url: string;
  caFile: string;
  ca: string;
  hits: string[];
  server: Server<unknown>;
  stop(): void;
}

export function httpsSite(routes: Record<string, (req: Request) => Response | Promise<Response>>): HttpsSite {
  const dir = tempDir('svc-tls-');
  const { made, cert, key } = selfSignedCert(dir, '/CN=localhost', 'IP:127.0.0.1,DNS:localhost');
  if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`);
  const hits: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    tls: { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') },
    fetch(req) {
      const path = new URL(req.url).pathname;
      hits.push(path);
      const h = routes[path];
      return h ? h(req) : new Response('no route', { status: 404 });
    },
  });
  return {
    url: `https://127.0.0.1:${server.port}`,
    caFile: cert,
    ca: readFileSync(cert, 'utf8'),
    hits,
    server,
    stop: () => {
      server.stop(true);
      removeTempDir(dir);
    },
  };
}
