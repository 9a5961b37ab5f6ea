import type { ContentSql } from '../store/db.ts';
import { run } from './db.ts';
import type { Statement } from './tx.ts';

/**
 * Record ownership (issue 12): a record a customer creates remembers the customer
 * (`records.owner_customer_id`); field access `self` means "the record's owner". Ownership is
 * set once at creation and never moves, so checking it before a write transaction is safe.
 */
export async function setOwner(tx: ContentSql, projectId: string, recordId: string, customerId: string): Promise<void> {
  await run(tx, `update records set owner_customer_id = $3::text where project_id = $1::text and id = $2::text`, [
    projectId,
    recordId,
    customerId,
  ]);
}

/** The same as a statement of the record's write transaction (src/content/tx.ts). */
export function ownerStatement(projectId: string, recordId: string, customerId: string): Statement {
  return {
    text: `update records set owner_customer_id = $3::text where project_id = $1::text and id = $2::text`,
    params: [projectId, recordId, customerId],
  };
}

/** The owner of a record of the project; undefined when there is no such record, null when nobody owns it. */
export async function ownerOf(
  sql: ContentSql,
  projectId: string,
  recordId: string,
): Promise<string | null | undefined> {
  const rows = await run<{ owner_customer_id: string | null }>(
    sql,
    `select owner_customer_id from records where project_id = $1::text and id = $2::text`,
    [projectId, recordId],
  );
  return rows.length === 0 ? undefined : rows[0]!.owner_customer_id;
}
