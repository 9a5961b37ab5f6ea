import { Kind, type OperationDefinitionNode, type ValueNode } from 'graphql';
import { isPublicKey } from '../auth/principal.ts';
import { auditOn, recordAudit, NO_ORIGIN, type AuditTarget } from '../editorial/audit.ts';
import type { GqlContext } from './context.ts';
import { auditWho } from './writes.ts';

/**
 * The audit entry of GraphQL mutations that do not write records (secrets, files, customers'
 * roles, notifications, operations…): one row per top-level field, action `graphql.<field>`,
 * target the field's `_id`/`id`/`key`/`label` argument — never another argument (a secret's value
 * is an argument). Record writes, restores, schedules and collaboration saves log themselves in
 * their own transaction and mark the request (`ctx.audited`), so they are not logged twice.
 * Requests through public keys (customer sign-in and self-service) are not logged here: their
 * record writes are, as the customer.
 */
const ID_ARGS = ['_id', 'id', 'key', 'label', 'recordId', 'fileId'];

function argValue(v: ValueNode, vars: Record<string, unknown>): string | null {
  if (v.kind === Kind.STRING || v.kind === Kind.INT || v.kind === Kind.ENUM) return String(v.value);
  if (v.kind === Kind.VARIABLE) {
    const x = vars[v.name.value];
    return typeof x === 'string' || typeof x === 'number' ? String(x) : null;
  }
  return null;
}

export async function auditMutation(
  ctx: GqlContext,
  op: OperationDefinitionNode,
  vars: Record<string, unknown>,
): Promise<void> {
  if (ctx.audited || !auditOn() || isPublicKey(ctx.principal.kind)) return;
  const targets: AuditTarget[] = [];
  for (const sel of op.selectionSet.selections) {
    if (sel.kind !== Kind.FIELD || sel.name.value.startsWith('__')) continue;
    const arg = sel.arguments?.find((a) => ID_ARGS.includes(a.name.value));
    targets.push({ action: `graphql.${sel.name.value}`, kind: 'mutation', id: arg ? argValue(arg.value, vars) : null });
  }
  if (targets.length === 0) return;
  await recordAudit(
    ctx.svc.sql,
    { projectId: ctx.snapshot.id, tenantId: ctx.snapshot.tenantId },
    auditWho(ctx),
    ctx.auditFrom?.() ?? NO_ORIGIN,
    targets.slice(0, 50),
  );
}
