import { SQL } from 'bun';
import type { Reader, Sql } from '../store/db.ts';

/**
 * Every content query goes through `run`, so tests can count round trips per request
 * (the no-N+1 rule) with `observeQueries` instead of mocking storage.
 */
type Observer = (text: string) => void;
let observer: Observer | undefined;

export function observeQueries(fn: Observer | undefined): void {
  observer = fn;
}

export function run<T>(sql: Sql | Reader, text: string, params: unknown[]): Promise<T[]> {
  observer?.(text);
  if (sql instanceof SQL) return sql.unsafe(text, params) as unknown as Promise<T[]>;
  return sql.unsafe(text, params as never[], { prepare: true }) as unknown as Promise<T[]>;
}
