import { SQL } from 'bun';
import type { ContentSql, Sql } from '../store/db.ts';
import { read } from '../store/coalesce.ts';
import { RoutedReads } from '../store/routed-reads.ts';

/** Where a content read runs: a pool, or a replica route (store/replicas.ts) that falls back to the primary. */
export type Reader = Sql | ContentSql | RoutedReads;

/**
 * Every content query goes through `run`, so tests can count round trips per request
 * (the no-N+1 rule) with `observeQueries` instead of mocking storage.
 */
type Observer = (text: string) => void;
let observer: Observer | undefined;

export function observeQueries(fn: Observer | undefined): void {
  observer = fn;
}

export function run<T>(sql: Reader, text: string, params: unknown[]): Promise<T[]> {
  observer?.(text);
  if (sql instanceof RoutedReads) return sql.run<T>(text, params).catch(withSqlState);
  if (sql instanceof SQL) return read<T>(sql, text, params).catch(withSqlState);
  return sql.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<T[]>;
}

/**
 * Bun's client puts the SQLSTATE in `errno` (its `code` is ERR_POSTGRES_SERVER_ERROR); callers
 * branch on `code` as with postgres.js, so the state is copied there.
 */
function withSqlState(err: unknown): never {
  const e = err as { errno?: unknown; code?: unknown };
  if (err instanceof Error && typeof e.errno === 'string' && /^[0-9A-Z]{5}$/.test(e.errno)) {
    throw Object.assign(new Error(err.message), { code: e.errno, cause: err });
  }
  throw err;
}
