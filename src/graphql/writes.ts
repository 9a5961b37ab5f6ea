import { NotFound } from '../errors.ts';
import { writtenStatement } from '../content/read.ts';
import type { ContentRow, ReadScope, RecordNode } from '../content/types.ts';
import type { WriteContext, WriteStep } from '../content/write.ts';
import type { BusEvent } from '../bus/bus.ts';
import { WriteTx, type Committed, type Handle, type Statement } from '../content/tx.ts';
import type { GqlContext } from './context.ts';
import type { ModelDef } from '../projects/types.ts';
import { queueHooks } from '../content/hooks.ts';
import { node } from './resolvers.ts';
import { DEFAULT_VARIANT, targeting } from '../content/targeting.ts';
import { auditOn, auditStatement, NO_ORIGIN, type AuditTarget, type AuditWho } from '../editorial/audit.ts';

/**
 * How GraphQL mutations write: build the transaction (writes, then a read of what they wrote),
 * commit it through the service's WriteCommitter (one commit, events after it), and answer
 * from the rows read inside the transaction — no read after the commit (issue 11).
 */
export function writeContext(ctx: GqlContext): WriteContext {
  // Customer writes are attributed to the customer, everything else to the key.
  return {
    projectId: ctx.snapshot.id,
    defaultLocale: ctx.snapshot.defaultLocale,
    userId: writerId(ctx),
    models: modelLookup(ctx.snapshot.models),
  };
}

/**
 * The snapshot's models by key, made once per snapshot rather than per mutation (a Map of every
 * model per write was ~1.5 % of the service's samples in the write bench; docs/decisions.md,
 * "Writes, session 5: service CPU per mutation"). A snapshot's model list is replaced, never changed, when models change.
 */
const lookups = new WeakMap<readonly ModelDef[], (key: string) => ModelDef | undefined>();
function modelLookup(models: readonly ModelDef[]): (key: string) => ModelDef | undefined {
  let lookup = lookups.get(models);
  if (!lookup) {
    const all = new Map(models.map((m) => [m.key, m]));
    lookup = (k) => all.get(k);
    lookups.set(models, lookup);
  }
  return lookup;
}

const writerId = (ctx: GqlContext): string | null => ctx.customer?.customerId ?? ctx.principal.keyId;

/** The default content's context, made once: a context per write (a Set, a sort, a JSON key) was ~2 % of a mutation's samples. */
const DEFAULT_CONTENT = Object.freeze(targeting('', [], DEFAULT_VARIANT));

/** A write answers with what it wrote: the working version of that locale and variant (default: the default content). */
export function draftScope(
  ctx: GqlContext,
  locale: string | null | undefined,
  variantId: string = DEFAULT_VARIANT,
): ReadScope {
  return {
    projectId: ctx.snapshot.id,
    stage: 'draft',
    locale: locale || ctx.snapshot.defaultLocale,
    defaultLocale: ctx.snapshot.defaultLocale,
    targeting: variantId === DEFAULT_VARIANT ? DEFAULT_CONTENT : targeting('', [], variantId),
  };
}

export function newTx(ctx: GqlContext): WriteTx {
  ctx.noStore = true;
  const tx = new WriteTx({ projectId: ctx.snapshot.id, userId: writerId(ctx) });
  // Hook outbox: the executions commit with the records, or not at all (src/content/hooks.ts).
  queueHooks(tx, ctx.snapshot.id, ctx.snapshot.hooks, writerId(ctx));
  // The audit log: one INSERT more in the same transaction (docs/audit.md), none of its own.
  if (auditOn()) ctx.audited = true;
  return tx;
}

function auditTargets(events: readonly BusEvent[]): AuditTarget[] {
  const targets: AuditTarget[] = [];
  for (const e of events)
    if (e.type === 'record.changed') targets.push({ action: `record.${e.action}`, kind: 'record', id: e.recordId });
  return targets;
}

/** Who makes a GraphQL request: the customer of a token, the signed-in member, else the key. */
export function auditWho(ctx: GqlContext): AuditWho {
  if (ctx.customer) return { kind: 'customer', id: ctx.customer.customerId };
  if (ctx.principal.member) return { kind: 'member', id: ctx.principal.member.memberId };
  return { kind: 'apiKey', id: ctx.principal.keyId };
}

/** An audit INSERT for changes this request made (to join the change's transaction). */
export function auditOf(ctx: GqlContext, targets: readonly AuditTarget[]) {
  return auditStatement(
    { projectId: ctx.snapshot.id, tenantId: ctx.snapshot.tenantId },
    auditWho(ctx),
    ctx.auditFrom?.() ?? NO_ORIGIN,
    targets,
  );
}

/**
 * Sends the transaction with its audit entry (docs/audit.md): one INSERT more, built here from
 * the transaction's events when they are known (a finisher, which makes the committer copy the
 * statement and event lists, only for a prelude transaction, whose writes come later).
 */
export function commit(ctx: GqlContext, tx: WriteTx): Promise<Committed> {
  if (auditOn()) {
    if (tx.prelude) {
      tx.finish((events) => {
        const targets = auditTargets(events);
        return targets.length ? { statements: [auditOf(ctx, targets)] } : undefined;
      });
    } else {
      const targets = auditTargets(tx.events);
      if (targets.length) tx.follow(auditOf(ctx, targets));
    }
  }
  return ctx.svc.writes.commit(tx);
}

/** Reads back, inside the transaction, the working version of records it wrote. */
export function readBack(
  tx: WriteTx,
  scope: ReadScope,
  ids: readonly string[],
  restrictTo: readonly string[] | null,
): Handle<ContentRow> {
  return tx.read<ContentRow>(writtenStatement(scope, ids, restrictTo));
}

/** One write and the record as it stands after it (the per-model mutations). */
export async function writeOne(
  ctx: GqlContext,
  step: WriteStep,
  locale: string | null | undefined,
  follow: Statement[] = [],
  variantId?: string,
): Promise<RecordNode> {
  const tx = newTx(ctx);
  const scope = draftScope(ctx, locale, variantId);
  // The write's own statement answers with the record when nothing follows it that could change
  // the row (an owner, a variant): one statement less per mutation (sql/027_write_rows.sql).
  const own =
    step.row !== undefined && follow.length === 0 ? tx.written<ContentRow>({ ...step, row: step.row }) : undefined;
  if (!own) tx.write(step);
  for (const st of follow) tx.follow(st);
  const h = own ?? readBack(tx, scope, [step.recordId], null);
  const done = await commit(ctx, tx);
  const row = done.rows(h)[0];
  const n = row ? node(ctx, row, scope) : null;
  if (!n) throw new NotFound(`No record with _id "${step.recordId}"`);
  return n;
}
