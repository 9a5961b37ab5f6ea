/**
 * A client's date-time as a Date PostgreSQL can store, or null. JavaScript parses years up to
 * ±275760 (`+275760-09-13T00:00:00.000Z`) and before year 1; `timestamptz` takes neither in that
 * form, and a Date outside it reached the database as an error there (a 500, not BAD_USER_INPUT;
 * found by the editorial fuzz). Every parse of a client's time goes through this one check.
 */
export function pgInstant(value: unknown): Date | null {
  const d =
    value instanceof Date ? value : typeof value === 'string' || typeof value === 'number' ? new Date(value) : null;
  if (!d || Number.isNaN(d.getTime())) return null;
  const year = d.getUTCFullYear();
  return year < 1 || year > 9999 ? null : d;
}
