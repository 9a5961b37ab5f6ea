import type { Sql } from '../store/db.ts';
import type { ModelDef } from '../projects/types.ts';

/**
 * Role stamping (spec "Rules for customer roles" 1–4): the scopes a login writes into the
 * session, and so into every access token of it.
 * - default roles (`isDefault`) apply to every customer, assigned roles to their customers;
 *   disabled roles to nobody;
 * - `self:*` expands to `records:read:<m>` and `records:write:<m>` for each customer-writable
 *   model (one whose field grants write to `self`), and never to `operations:execute`;
 * - refresh re-uses the session's scopes (customer-sessions.ts); a role change shows at the next login.
 * A customer with no role holds no scopes of their own: what the key reads, they read.
 */
export function customerWritableModels(models: readonly ModelDef[]): string[] {
  return models.filter((m) => m.fields.some((f) => f.access?.write?.includes('self'))).map((m) => m.key);
}

export function expandPermissions(permissions: readonly string[], models: readonly ModelDef[]): string[] {
  const out = new Set<string>();
  for (const p of permissions) {
    if (p === 'self:*') {
      for (const m of customerWritableModels(models)) {
        out.add(`records:read:${m}`);
        out.add(`records:write:${m}`);
      }
    } else out.add(p);
  }
  return [...out].sort();
}

/** The role keys and stamped scopes of a customer at this moment (login time). */
export async function stampScopes(
  sql: Sql,
  projectId: string,
  customerId: string,
  models: readonly ModelDef[],
): Promise<{ roles: string[]; scopes: string[] }> {
  const rows = await sql<{ key: string; permissions: string[] }[]>`
    select r.key, r.permissions from customer_roles r
    where r.project_id = ${projectId} and r.disabled_at is null
      and (r.is_default or exists (select 1 from customer_role_assignments a
                                   where a.project_id = r.project_id and a.role_id = r.id and a.customer_id = ${customerId}))
    order by r.key`;
  return {
    roles: rows.map((r) => r.key),
    scopes: expandPermissions(
      rows.flatMap((r) => r.permissions),
      models,
    ),
  };
}
