import net from 'node:net';

/**
 * The sockets of our postgres.js pools (its `socket` option): plain TCP or Unix sockets, except
 * that a server closing one before the connection was ready (a FATAL at startup: the database was
 * dropped, it is not accepting connections, the server is starting up or shutting down) closes it
 * with an error rather than cleanly.
 *
 * postgres.js 3.4.9 keeps the query a connection last ran when that connection closes (the query
 * is rejected, but stays the connection's "current" one), and takes an error the server sends at
 * the next startup for that stale query's: the query the connection was reopened for is never
 * rejected, and on a clean close postgres.js reconnects at once, for as long as the server
 * refuses. So a connection that was terminated mid-query and reused while the database was away
 * left its new query pending for good, and reconnected some 70 times a second (the scheduled-actions
 * worker stopped ticking in test/server/database-away.test.ts about one run in ten; upstream
 * porsager/postgres#1193). A socket error instead makes postgres.js reject every query of the
 * connection and reconnect after its backoff (`PG_BACKOFF`).
 *
 * Only the startup is watched: server messages are framed until the first ReadyForQuery, then the
 * socket is left alone. A close the client began (postgres.js ends with Terminate), and the close
 * that answers a cancel request (16 bytes, no reply), stay clean. With TLS, postgres.js replaces
 * this socket by its TLS socket and the watch falls away: such a pool has only the loops' tick
 * deadlines (store/tick.ts).
 */
export function pgSocket(options: PoolOptions): net.Socket {
  // A URL of several hosts (`postgres://a,b/db`): each new socket tries the next, as postgres.js does
  // with the sockets it makes itself (it leaves a custom socket's host to the socket's maker).
  const i = nextHost.get(options) ?? 0;
  nextHost.set(options, (i + 1) % Math.max(1, options.port.length));
  const host = options.host[i]!;
  const port = options.port[i]!;
  const socket = options.path ? net.connect(options.path) : net.connect(port, host);
  const where = options.path || `${host}:${port}`;
  // postgres.js names these in its connection errors; it sets them itself on sockets it makes.
  Object.assign(socket, { host, port });
  let pending: Buffer = Buffer.alloc(0);
  const watch = (chunk: Buffer) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    // Messages: a type byte, then a 4-byte length that counts itself.
    while (pending.length >= 5) {
      const end = 1 + pending.readUInt32BE(1);
      if (pending.length < end) return;
      if (pending[0] === READY_FOR_QUERY) {
        socket.off('data', watch);
        socket.off('end', closedEarly);
        pending = Buffer.alloc(0);
        return;
      }
      pending = pending.subarray(end);
    }
  };
  const closedEarly = () => {
    if (socket.writableEnded || socket.bytesWritten === CANCEL_REQUEST_BYTES) return;
    const err = new Error(`write CONNECTION_CLOSED ${where}`);
    socket.destroy(Object.assign(err, { code: 'CONNECTION_CLOSED', errno: 'CONNECTION_CLOSED' }));
  };
  socket.on('data', watch);
  socket.on('end', closedEarly);
  return socket;
}

type PoolOptions = { host: string[]; port: number[]; path?: string | false };
const nextHost = new WeakMap<PoolOptions, number>();

const READY_FOR_QUERY = 0x5a; // 'Z'
const CANCEL_REQUEST_BYTES = 16;

/**
 * Seconds postgres.js waits before reopening a connection that closed with an error, after
 * `retries` such closes in a row in the pool (reset by a connection that opens). Its default grows
 * to 10–20 s, so a process picked up up to 20 s after its database came back; this one stops at
 * 0.5–1 s: one attempt a second per connection at most while the server is away.
 */
export function PG_BACKOFF(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1);
}
