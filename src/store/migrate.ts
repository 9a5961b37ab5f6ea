import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Sql } from './db.ts';

const SQL_DIR = join(import.meta.dir, '..', '..', 'sql');
/** Arbitrary constant: the advisory lock that serialises migrations across processes. */
const LOCK = 727_001;

export interface Migration {
  name: string;
  text: string;
}

export function listMigrations(dir = SQL_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_.+\.sql$/.test(f))
    .sort()
    .map((name) => ({ name, text: readFileSync(join(dir, name), 'utf8') }));
}

/**
 * Applies every file of `sql/` not yet recorded, in name order, each in its own transaction.
 * A transaction-scoped advisory lock makes two processes starting at once take turns:
 * the second one finds the rows the first one recorded and applies nothing.
 */
export async function migrate(sql: Sql, migrations = listMigrations()): Promise<string[]> {
  // Under the same lock as the migrations: two processes racing on `create table if not exists`
  // fail one of them with a unique violation (23505, PostgreSQL 15) or "type already exists"
  // (42710, PostgreSQL 18, seen in CI's embedded pass), whichever catalog row they meet first.
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK})`;
    await tx`create table if not exists svc_migrations (
      name text primary key,
      applied_at timestamptz not null default now()
    )`;
  });
  const applied: string[] = [];
  for (const m of migrations) {
    const done = await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${LOCK})`;
      const seen = await tx`select 1 from svc_migrations where name = ${m.name}`;
      if (seen.length > 0) return false;
      await tx.unsafe(m.text);
      await tx`insert into svc_migrations (name) values (${m.name})`;
      return true;
    });
    if (done) applied.push(m.name);
  }
  return applied;
}
