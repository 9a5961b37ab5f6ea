import postgres from 'postgres';
import { SQL } from 'bun';
import { PG_BACKOFF, pgSocket } from './pg-socket.ts';
import { coalesceReads } from './coalesce.ts';

export type Sql = postgres.Sql<Record<string, never>>;

/**
 * One postgres.js pool per process. `connect_timeout` keeps an unreachable DATABASE_URL
 * from hanging start-up (issue 2: exit within 10 s with one clear line).
 */
/**
 * The `application_name` of a pool's connections: which pool of which process, so GET /metrics
 * can count this process's connections in pg_stat_activity (src/store/pools.ts).
 */
export function poolName(pool: string): string {
  return `svc ${pool} ${process.pid}`;
}

/** A server that closes a connection at startup fails its query, not hangs it (store/pg-socket.ts). */
const closeSafely = { socket: pgSocket, backoff: PG_BACKOFF } as unknown as Pick<
  postgres.Options<Record<string, never>>,
  'backoff'
>;

export function connect(url: string, opts: { max?: number; pool?: string } = {}): Sql {
  return postgres(url, {
    max: opts.max ?? 10,
    connect_timeout: 5,
    idle_timeout: 60,
    ...closeSafely,
    onnotice: () => {},
    transform: { undefined: null },
    connection: { application_name: poolName(opts.pool ?? 'control') },
  }) as unknown as Sql;
}

/**
 * One connection that stays the same backend for as long as it lives (session state such as
 * advisory locks lives there): never idle-closed or recycled. `onclose` hears its loss; after it,
 * queries would silently run on a new backend, so the owner starts over with a new session.
 */
export function connectSession(url: string, opts: { pool: string; onclose: () => void }): Sql {
  return postgres(url, {
    max: 1,
    connect_timeout: 5,
    idle_timeout: null,
    max_lifetime: null,
    ...closeSafely,
    onnotice: () => {},
    onclose: opts.onclose,
    // Advisory-lock calls only, no arrays: no array-type read per connection (see typesOnce).
    fetch_types: false,
    transform: { undefined: null },
    connection: { application_name: poolName(opts.pool) },
  } as never) as unknown as Sql;
}

/**
 * A pool for `sql.listen` on ONE channel, and nothing else. postgres.js runs every LISTEN of a
 * pool on one hidden connection and, each time that connection closes, re-runs each channel's
 * LISTEN; with two channels on it and the server gone (database dropped), every failed reconnect
 * left one LISTEN queued that never settles, with its promises and closures — ~85 per second,
 * without bound (a process reached 23 GB). With one channel nothing stays queued. The pool's own
 * connections open only if queried, so it costs just the listening connection.
 */
export function connectListener(url: string, opts: { pool: string }): Sql {
  return postgres(url, {
    max: 1,
    connect_timeout: 5,
    // LISTEN and UNLISTEN only: no array-type read per connection (see typesOnce).
    fetch_types: false,
    ...closeSafely,
    onnotice: () => {},
    connection: { application_name: poolName(opts.pool) },
  }) as unknown as Sql;
}

/**
 * Makes a pool read the server's array types once, not on every new connection: call it after a
 * query ran on the pool (its connection read them; the pool keeps them for all its connections).
 *
 * postgres.js 3.4.9 (`fetch_types`, on by default) runs its array-type query on each new
 * connection before the query the connection was opened for, and mishandles a connection closed
 * in that phase (its backend terminated by a restart, a failover, `pg_terminate_backend`, `drop
 * database … with (force)`): the error of the type query is kept, the connection reconnects at
 * once, and while the server refuses it the error of every attempt is taken for the type query's,
 * so the waiting query never settles and the connection reconnects without pause (measured: ~70
 * new backends a second). A loop whose tick waited on it stopped for good (the flaky
 * test/server/database-away.test.ts: ~1 run in 10). Once the server is back, the stale error is
 * replayed onto the waiting query and the type query's rejection is unhandled, which ends a Bun
 * process (upstream issues porsager/postgres#1193, #1223). A connection that never runs the type
 * query has none of this: a close then rejects its query (CONNECTION_CLOSED) and the pool backs off.
 *
 * Array types created after the read (a later migration) are not parsed by this pool: read such
 * columns as text (none is read today).
 */
export function typesOnce(sql: Sql): void {
  const options = sql.options as unknown as { fetch_types: boolean; shared: { typeArrayMap: object } };
  if (Object.keys(options.shared.typeArrayMap).length > 0) options.fetch_types = false;
}

/** Fails fast with one line if the server cannot be reached. */
export async function ping(sql: Sql, url: string): Promise<void> {
  try {
    await sql`select 1`;
  } catch (err) {
    const safe = url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot reach PostgreSQL at ${safe}: ${reason}`);
  }
}

/**
 * The content pool: Bun's native PostgreSQL client, serving the content API's reads and record
 * writes (`src/content/read.ts`, `write.ts`). postgres.js goes through Bun's node:net layer for
 * every socket write, which measured +32% slower on reads and 40% of the server's CPU on writes
 * (docs/decisions.md). Migrations, the control plane and LISTEN/NOTIFY stay on postgres.js.
 */
export type ContentSql = InstanceType<typeof SQL>;

export function connectContentSql(
  url: string,
  opts: { max?: number; pool?: string; coalesce?: boolean } = {},
): ContentSql {
  // Bun passes `connection` as startup parameters, like postgres.js.
  const options = {
    url,
    max: opts.max ?? 10,
    idleTimeout: 60,
    connectionTimeout: 5,
    connection: { application_name: poolName(opts.pool ?? 'content') },
  };
  const pool = new SQL(options as ConstructorParameters<typeof SQL>[0]);
  // Two statements deep per connection: Bun's client pipelines (store/coalesce.ts).
  if (opts.coalesce) coalesceReads(pool, 2 * options.max);
  return pool;
}
