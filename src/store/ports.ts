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
 * (Linux: `ip_local_port_range`, 32768–60999 by default), where only listeners live. `avoid`:
 * ports never answered, free or not (listeners of this process about to bind them).
 */
export async function freePort(avoid: readonly number[] = []): Promise<number> {
  const [low] = ephemeralRange();
  const from = 10_000;
  if (low - from >= 1_000) {
    for (let i = 0; i < 50; i++) {
      const candidate = from + Math.floor(Math.random() * (low - from));
      if (avoid.includes(candidate)) continue;
      const port = await listenOnce(candidate);
      if (port !== null) return port;
    }
  }
  for (let i = 0; i < 10; i++) {
    const any = await listenOnce(0);
    if (any !== null && !avoid.includes(any)) return any;
  }
  throw new Error('no TCP port free on 127.0.0.1');
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

/** Listens on `port` (0: one the OS picks) on 127.0.0.1 and closes again: the port, or null if taken. */
function listenOnce(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => {
      const addr = srv.address();
      const bound = typeof addr === 'object' && addr ? addr.port : port;
      srv.close(() => resolve(bound));
    });
  });
}
