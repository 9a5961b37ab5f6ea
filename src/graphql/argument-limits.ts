import { BadUserInput } from '../errors.ts';
import { decodeCursor } from '../content/sql-builder.ts';
import { LIMITS } from './limits.ts';

/**
 * Limits on arguments as resolvers receive them (already coerced), checked before any SQL is
 * built: a `where` tree's size, a cursor's length, the sort keys of an `orderBy`.
 */
/**
 * A `where` argument (already coerced): AND / OR / NOT nesting at most `maxFilterDepth`, and at
 * most `maxFilterBreadth` conditions, branches and list items in all. Checked before any SQL
 * is built, so a huge tree never reaches the builder or PostgreSQL.
 */
export function checkWhere(where: unknown): void {
  if (where === null || where === undefined) return;
  let breadth = 0;
  const stack: { w: unknown; depth: number }[] = [{ w: where, depth: 0 }];
  while (stack.length) {
    const { w, depth } = stack.pop()!;
    if (typeof w !== 'object' || w === null) continue;
    if (depth > LIMITS.maxFilterDepth)
      throw new BadUserInput(`"where" may nest AND/OR/NOT at most ${LIMITS.maxFilterDepth} levels deep`, {
        field: 'where',
      });
    for (const [k, v] of Object.entries(w)) {
      if (v === null || v === undefined) continue;
      if (k === 'AND' || k === 'OR') {
        const list = Array.isArray(v) ? v : [v];
        breadth += list.length;
        for (const x of list) stack.push({ w: x, depth: depth + 1 });
      } else if (k === 'NOT') {
        breadth++;
        stack.push({ w: v, depth: depth + 1 });
      } else {
        for (const op of Object.values(v as Record<string, unknown>))
          breadth += Array.isArray(op) ? Math.max(1, op.length) : 1;
      }
      if (breadth > LIMITS.maxFilterBreadth)
        throw new BadUserInput(`"where" holds more than ${LIMITS.maxFilterBreadth} conditions and values`, {
          field: 'where',
        });
    }
  }
}

/** A pagination cursor's size, before it is decoded. */
export function checkCursor(cursor: string): string {
  if (cursor.length > LIMITS.maxCursorLength) throw new BadUserInput('Invalid cursor', { field: 'after' });
  return cursor;
}

/** An `orderBy` argument: at most `maxOrderBy` keys (found by the fuzz suite: PostgreSQL's own limit was the only one). */
export function checkOrderBy(orderBy: unknown): void {
  if (Array.isArray(orderBy) && orderBy.length > LIMITS.maxOrderBy) {
    throw new BadUserInput(`"orderBy" holds at most ${LIMITS.maxOrderBy} sort keys`, { field: 'orderBy' });
  }
}

/**
 * The position a search cursor holds (`["s", offset]`: search pages by position), at most
 * `maxSearchOffset`; 0 without one. Full-text and semantic search read the same cursors.
 */
export function searchOffset(after: unknown): number {
  if (!after) return 0;
  const c = decodeCursor(checkCursor(after as string));
  if (
    c.length !== 2 ||
    c[0] !== 's' ||
    !Number.isSafeInteger(c[1]) ||
    (c[1] as number) < 0 ||
    (c[1] as number) > LIMITS.maxSearchOffset
  ) {
    throw new BadUserInput('Invalid cursor', { field: 'after' });
  }
  return c[1] as number;
}
