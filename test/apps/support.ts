import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'bun';
import { removeTempDir, tempDir } from '../support/tmp.ts';

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
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  const made = Bun.spawnSync([
    'openssl',
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ]);
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
