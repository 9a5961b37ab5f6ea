import type { Sql } from '../store/db.ts';
import { BadUserInput } from '../errors.ts';
import { pgInstant } from '../store/instant.ts';
import type { FileRow } from './store.ts';

/**
 * `files(first, after, folder, contentType)`: newest first, keyset-paged on (created_at, id).
 * `owner`: 'all' (the project's files), a customer id (that customer's uploads), or 'keys'
 * (uploads made without a customer token). Soft-deleted files are never listed.
 */
export interface ListArgs {
  first?: number | null;
  after?: string | null;
  folder?: string | null;
  contentType?: string | null;
}

export type Owner = { all: true } | { customerId: string } | { keysOnly: true };

const MAX_FIRST = 100;

function cursorOf(row: FileRow): string {
  return Buffer.from(`${row.created_at.toISOString()}|${row.id}`).toString('base64url');
}

function parseCursor(c: string): [Date, string] {
  const [at, id] = Buffer.from(c, 'base64url').toString().split('|');
  const d = pgInstant(at);
  if (!id || !d) throw new BadUserInput('after is not a cursor of files');
  return [d, id];
}

export async function listFiles(sql: Sql, projectId: string, owner: Owner, args: ListArgs) {
  const first = Math.min(Math.max(args.first ?? 20, 0), MAX_FIRST);
  const after = args.after ? parseCursor(args.after) : null;
  const type = args.contentType ?? null;
  const prefix = type && type.endsWith('/*') ? type.slice(0, -1) : null;
  const rows = await sql<FileRow[]>`
    select * from files
    where project_id = ${projectId} and deleted_at is null
      ${'customerId' in owner ? sql`and customer_id = ${owner.customerId}` : 'keysOnly' in owner ? sql`and customer_id is null` : sql``}
      ${args.folder != null ? sql`and folder = ${args.folder}` : sql``}
      ${prefix ? sql`and starts_with(content_type, ${prefix})` : type ? sql`and content_type = ${type}` : sql``}
      ${after ? sql`and (created_at, id) < (${after[0]}, ${after[1]})` : sql``}
    order by created_at desc, id desc
    limit ${first + 1}`;
  const page = rows.slice(0, first);
  return {
    edges: page.map((row) => ({ cursor: cursorOf(row), node: row })),
    pageInfo: { hasNextPage: rows.length > first, endCursor: page.length ? cursorOf(page[page.length - 1]!) : null },
  };
}
