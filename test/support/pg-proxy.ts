import net from 'node:net';
import { serverUrl } from './db.ts';

/**
 * A TCP proxy in front of the suite's PostgreSQL server, for tests that need a database incident
 * to land at one exact moment of the client's protocol. Everything is passed through unchanged,
 * except that while `holdTypes` is set, postgres.js's array-type query (the `fetch_types` query
 * every new connection of a pool runs before its first query, unless told otherwise) is held back:
 * such a connection stays in that phase, with the query it was opened for waiting, until the test
 * terminates its backend. That is the window in which postgres.js 3.4.9 could leave the waiting
 * query pending forever (docs/decisions.md, "A query that never settles").
 */
export interface PgProxy {
  /** `databaseUrl` with the proxy's port. */
  url(databaseUrl: string): string;
  /** Holds the array-type queries of new connections back while set. */
  holdTypes: boolean;
  /** Array-type queries held back so far. */
  readonly held: number;
  /** Client connections accepted so far. */
  readonly accepted: number;
  /** Of the first `n` client connections accepted, those still open. */
  openAmongFirst(n: number): number;
  close(): Promise<void>;
}

/** The array-type query of postgres.js (src/connection.js fetchArrayTypes), as it reaches the server. */
const TYPES_QUERY = "where a.typcategory = 'A'";

export async function startPgProxy(upstream = serverUrl()): Promise<PgProxy> {
  const target = new URL(upstream);
  const sockets = new Set<net.Socket>();
  /** Accept numbers of the client connections still open. */
  const open = new Set<number>();
  let held = 0;
  let accepted = 0;
  const server = net.createServer((client) => {
    const n = accepted++;
    open.add(n);
    sockets.add(client);
    const up = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(up);
    up.on('data', (d) => client.write(d));
    client.on('data', (d) => {
      // A chunk is held whole: postgres.js writes the query's Parse message in one piece, and on
      // loopback it arrives in one.
      if (proxy.holdTypes && d.toString('latin1').includes(TYPES_QUERY)) held++;
      else up.write(d);
    });
    // A close on one side closes the other the same way (FIN for FIN), as the server's own would.
    up.on('end', () => client.end());
    client.on('end', () => up.end());
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
    up.on('close', () => sockets.delete(up));
    client.on('close', () => {
      sockets.delete(client);
      open.delete(n);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const proxy: PgProxy = {
    url(databaseUrl) {
      const u = new URL(databaseUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    holdTypes: false,
    get held() {
      return held;
    },
    get accepted() {
      return accepted;
    },
    openAmongFirst(n) {
      let count = 0;
      for (const i of open) if (i < n) count++;
      return count;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
