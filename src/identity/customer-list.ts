import type { Sql } from '../store/db.ts';
import { BadUserInput } from '../errors.ts';

/**
 * The customers of a project for the control plane (the Studio's Customers screen): newest
 * first, optionally filtered by an email or name fragment, at most 200 a page.
 */
export interface CustomerSummary {
  id: string;
  email: string;
  name: string | null;
  roles: string[];
  disabled: boolean;
  createdAt: string;
  lastLoginAt: string | null;
}

export async function listCustomers(
  sql: Sql,
  projectId: string,
  opts: { q?: unknown; limit?: unknown },
): Promise<CustomerSummary[]> {
  const limit = opts.limit === undefined || opts.limit === '' ? 50 : Number(opts.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200)
    throw new BadUserInput('limit must be a whole number from 1 to 200', { field: 'limit' });
  const q = typeof opts.q === 'string' && opts.q.trim() !== '' ? opts.q.trim().slice(0, 200) : null;
  const like = q === null ? null : `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await sql<
    {
      id: string;
      email: string;
      name: string | null;
      disabled_at: Date | null;
      created_at: Date;
      last_login_at: Date | null;
      roles: string[];
    }[]
  >`
    select c.id, c.email, c.name, c.disabled_at, c.created_at, c.last_login_at,
      coalesce((select array_agg(r.key order by r.key) from customer_role_assignments a join customer_roles r on r.id = a.role_id
                where a.project_id = c.project_id and a.customer_id = c.id and r.disabled_at is null), '{}') as roles
    from customers c
    where c.project_id = ${projectId} and (${like}::text is null or c.email ilike ${like} or c.name ilike ${like})
    order by c.created_at desc, c.id limit ${limit}`;
  return rows.map((r) => ({
    id: r.id,
    email: r.email,
    name: r.name,
    roles: r.roles,
    disabled: r.disabled_at !== null,
    createdAt: r.created_at.toISOString(),
    lastLoginAt: r.last_login_at?.toISOString() ?? null,
  }));
}
