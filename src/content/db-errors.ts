import { BadUserInput, NotFound, type SvcError } from '../errors.ts';

/**
 * How a failed write reads to its client. A statement may claim the database's error as its own
 * (`mapError`: a duplicate natural key is a CONFLICT); otherwise the SQLSTATEs the write
 * functions raise (sql/009_records_write.sql) are NOT_FOUND and BAD_USER_INPUT, and anything else
 * stays the database's (masked at the transport's boundary).
 */

/** A database error with its SQLSTATE in `code` (Bun's client keeps it in `errno`). */
export interface DbError extends Error {
  code: string;
  constraint?: string;
  detail?: string;
}

/** A statement's own reading of a database error (`Statement.mapError`, content/tx.ts). */
export type ErrorReading = (err: DbError) => SvcError | undefined;

/** SQLSTATEs the write statements raise (sql/009_records_write.sql). */
function mapState(err: DbError): SvcError | undefined {
  if (err.code === 'SV404') return new NotFound(err.message);
  if (err.code === 'SV400') return new BadUserInput(err.message, err.detail ? { field: err.detail } : undefined);
  return undefined;
}

/** The client's error for a failed transaction: the first statement that claims it, else by SQLSTATE. */
export function clientError(err: unknown, statements: readonly { mapError?: ErrorReading }[]): unknown {
  const db = dbError(err);
  if (!db) return err;
  for (const s of statements) {
    const mine = s.mapError?.(db);
    if (mine) return mine;
  }
  return mapState(db) ?? db;
}

/** The error as a DbError when it is the server's (it has a SQLSTATE); undefined for anything else (a lost connection). */
export function dbError(err: unknown): DbError | undefined {
  const e = err as { errno?: unknown; code?: unknown; constraint?: string; detail?: string; message?: string };
  const state =
    typeof e?.errno === 'string' && /^[0-9A-Z]{5}$/.test(e.errno)
      ? e.errno
      : typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)
        ? e.code
        : undefined;
  if (!state) return undefined;
  return Object.assign(new Error(e.message ?? 'database error', { cause: err }), {
    code: state,
    constraint: e.constraint,
    detail: e.detail,
  });
}
