import type { Sql } from './db.ts';

/**
 * Connections of this process's pools as PostgreSQL sees them (pg_stat_activity, by the
 * `application_name` every pool sets, store/db.ts): in use (running a statement or inside a
 * transaction), idle, and waiting on a lock. Neither client library exposes its queue of
 * statements waiting for a free connection, so that is not counted. One query per scrape.
 */
export interface PoolSample {
  pool: string;
  inUse: number;
  idle: number;
  waiting: number;
}

export async function poolConnections(sql: Sql): Promise<PoolSample[]> {
  const rows = await sql<{ pool: string; in_use: number; idle: number; waiting: number }[]>`
    select split_part(application_name, ' ', 2) as pool,
           count(*) filter (where state <> 'idle')::int as in_use,
           count(*) filter (where state = 'idle')::int as idle,
           count(*) filter (where wait_event_type = 'Lock')::int as waiting
    from pg_stat_activity
    where application_name like ${`svc % ${process.pid}`} and pid <> pg_backend_pid()
    group by 1 order by 1`;
  return rows.map((r) => ({ pool: r.pool, inUse: r.in_use, idle: r.idle, waiting: r.waiting }));
}
