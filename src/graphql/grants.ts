import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import { isPublicKey } from '../auth/principal.ts';
import { hasScope } from '../auth/scopes.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';

/**
 * What a customer's stamped scopes add to the schema of a public key (spec, customer roles rule
 * 2: the key never grants write or execute scopes to customers, only the role does): the models
 * they may write, the operations they may execute. Null: nothing, the key's own schema serves.
 */
export interface CustomerGrants {
  writes: ReadonlySet<string>;
  executes: ReadonlySet<string>;
  /** Whether any `operations:execute…` scope is stamped (the generic `executeOperation`). */
  executeSome: boolean;
  /** Whether unscoped `operations:execute` is stamped: `cancelOperationExecution` (own executions). */
  executeAll: boolean;
  /** Part of the schema cache key: equal grants share one schema. */
  key: string;
}

/** Per scope set (one per verified token, see identity/tokens.ts) and snapshot: the answer below. */
const grantsMemo = new WeakMap<ReadonlySet<string>, { snapshot: ProjectSnapshot; grants: CustomerGrants | null }>();

export function customerGrants(
  snapshot: ProjectSnapshot,
  principal: KeyPrincipal,
  customer: CustomerPrincipal | null | undefined,
): CustomerGrants | null {
  if (!customer || !isPublicKey(principal.kind)) return null;
  const hit = grantsMemo.get(customer.scopes);
  if (hit && hit.snapshot === snapshot) return hit.grants;
  let grants: CustomerGrants | null = null;
  if (customer.scopes.size > 0) {
    const writes = new Set<string>();
    const executes = new Set<string>();
    for (const m of snapshot.models) if (hasScope(customer.scopes, `records:write:${m.key}`)) writes.add(m.key);
    // `self:*` is expanded at mint time to record scopes only: it never covers operations:execute.
    for (const op of snapshot.operations)
      if (hasScope(customer.scopes, `operations:execute:${op.key}`)) executes.add(op.key);
    const executeAll = hasScope(customer.scopes, 'operations:execute');
    const executeSome =
      executes.size > 0 || executeAll || [...customer.scopes].some((s) => s.startsWith('operations:execute:'));
    if (writes.size || executeSome) {
      grants = {
        writes,
        executes,
        executeSome,
        executeAll,
        key: `w:${[...writes].sort().join(',')}:x:${executeSome ? [...executes].sort().join(',') : '-'}${executeAll ? ':all' : ''}`,
      };
    }
  }
  grantsMemo.set(customer.scopes, { snapshot, grants });
  return grants;
}
