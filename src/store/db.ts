import postgres from 'postgres';
import { SQL } from 'bun';

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

export function connect(url: string, opts: { max?: number; pool?: string } = {}): Sql {
  return postgres(url, {
    max: opts.max ?? 10,
    connect_timeout: 5,
    idle_timeout: 60,
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
    onnotice: () => {},
    onclose: opts.onclose,
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
    onnotice: () => {},
    connection: { application_name: poolName(opts.pool) },
  }) as unknown as Sql;
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

export function connectContentSql(url: string, opts: { max?: number; pool?: string } = {}): ContentSql {
  // Bun passes `connection` as startup parameters, like postgres.js.
  const options = {
    url,
    max: opts.max ?? 10,
    idleTimeout: 60,
    connectionTimeout: 5,
    connection: { application_name: poolName(opts.pool ?? 'content') },
  };
  return new SQL(options as ConstructorParameters<typeof SQL>[0]);
}
