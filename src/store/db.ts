import postgres from 'postgres';

export type Sql = postgres.Sql<Record<string, never>>;

/**
 * One postgres.js pool per process. `connect_timeout` keeps an unreachable DATABASE_URL
 * from hanging start-up (issue 2: exit within 10 s with one clear line).
 */
export function connect(url: string, opts: { max?: number } = {}): Sql {
  return postgres(url, {
    max: opts.max ?? 10,
    connect_timeout: 5,
    idle_timeout: 60,
    onnotice: () => {},
    transform: { undefined: null },
    connection: { application_name: 'svc' },
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
