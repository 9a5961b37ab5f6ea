import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (the OS picks it; a race with other binders remains). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const p = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(p));
    });
  });
}
