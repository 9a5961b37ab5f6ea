import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A TCP port free on 127.0.0.1 right now, for a server started a moment later (the embedded
 * PostgreSQL; tests that must know their port before they listen).
 *
 * Not one the OS picks for `listen(0)`: that comes from the ephemeral range, the same range every
 * outgoing connection's local port comes from, so between this check and the real listen any
 * connection the process (or another) opens may take it — a suite opening thousands of database
 * and HTTP connections met EADDRINUSE that way. Ports are tried at random below that range
 * (Linux: `ip_local_port_range`, 32768–60999 by default), where only listeners live.
 */
export async function freePort(): Promise<number> {
  const [low] = ephemeralRange();
  const from = 10_000;
  if (low - from >= 1_000) {
    for (let i = 0; i < 50; i++) {
      const port = from + Math.floor(Math.random() * (low - from));
      if (await bindable(port)) return port;
    }
  }
  return listenAny();
}

function ephemeralRange(): [number, number] {
  try {
    const [a, b] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (a && b && a > 0 && b >= a) return [a, b];
  } catch {
    /* not Linux: no range known, the OS picks */
  }
  return [0, 0];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function listenAny(): Promise<number> {
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
