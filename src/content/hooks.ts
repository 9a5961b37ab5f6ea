import type { ContentSql } from '../store/db.ts';
import type { HookDef } from '../projects/actor.ts';
import type { RecordAction } from './types.ts';
import type { BusEvent } from '../bus/bus.ts';
import type { Statement, WriteTx } from './tx.ts';
import { run } from './db.ts';
import { HOOK_ATTEMPTS, newExecutionId, type ExecutionRow } from '../operations/store.ts';

/**
 * Hooks (spec "Hook events"): a committed record change runs the operations of the hooks that
 * match it once. The execution rows are written in the record's own transaction — they are the
 * outbox — so a rolled-back write queues nothing and a committed one cannot lose its hooks;
 * dispatchers claim each row once (FOR UPDATE SKIP LOCKED). Without hooks this costs nothing:
 * the project snapshot says whether any exist.
 */
const EVENT_OF: Partial<Record<RecordAction, string>> = {
  created: 'RECORD_CREATED',
  updated: 'RECORD_UPDATED',
  deleted: 'RECORD_DELETED',
};

export interface RecordChange {
  action: RecordAction;
  recordId: string;
  modelKey: string;
}

export async function enqueueHooks(
  tx: ContentSql,
  projectId: string,
  hooks: readonly HookDef[],
  changes: readonly RecordChange[],
  userId: string | null,
): Promise<ExecutionRow[]> {
  const q = hookStatement(projectId, hooks, changes, userId);
  return q ? run<ExecutionRow>(tx, q.statement.text, q.statement.params) : [];
}

/**
 * The same as a statement for a write transaction sent as one message (src/content/tx.ts
 * `WriteTx.finish`), with the executions' `pending` events, known before it runs.
 */
export function hookStatement(
  projectId: string,
  hooks: readonly HookDef[],
  changes: readonly RecordChange[],
  userId: string | null,
): { statement: Statement; events: BusEvent[] } | undefined {
  if (hooks.length === 0 || changes.length === 0) return undefined;
  const ids: string[] = [];
  const keys: string[] = [];
  const ops: string[] = [];
  const inputs: string[] = [];
  for (const c of changes) {
    const event = EVENT_OF[c.action];
    if (!event) continue;
    for (const h of hooks) {
      if (h.event !== event || (h.modelKey !== null && h.modelKey !== c.modelKey)) continue;
      ids.push(newExecutionId());
      keys.push(h.key);
      ops.push(h.operationKey);
      inputs.push(JSON.stringify({ event, modelKey: c.modelKey, recordId: c.recordId, userId }));
    }
  }
  if (ids.length === 0) return undefined;
  const text = `
    insert into operation_executions (id, project_id, operation_key, url, trigger, trigger_key, input, max_attempts, timeout_ms, created_by)
    select x.id, o.project_id, o.key, o.url, 'hook', x.hook, x.input::jsonb, $6::int,
           operation_timeout_ms(o.definition),
           $7::text
    from unnest($2::text[], $3::text[], $4::text[], $5::text[]) with ordinality as x(id, hook, op, input, n)
    join operations o on o.project_id = $1::text and o.key = x.op
    order by x.n
    returning *`;
  const events: BusEvent[] = ids.map((id, i) => ({
    type: 'execution.changed',
    projectId,
    executionId: id,
    operationKey: ops[i]!,
    status: 'pending',
    progressPct: null,
    progressMessage: null,
    resultJson: null,
    errorJson: null,
  }));
  return { statement: { text, params: [projectId, ids, keys, ops, inputs, HOOK_ATTEMPTS, userId] }, events };
}

/**
 * Queues, in `tx` itself, the executions of the hooks its record changes match (when its writes
 * are all known: `WriteTx.finish`). Every record writer calls it (GraphQL mutations, member
 * writes, scheduled actions, releases), so a change runs the same hooks whoever made it.
 */
export function queueHooks(tx: WriteTx, projectId: string, hooks: readonly HookDef[], userId: string | null): WriteTx {
  if (hooks.length === 0) return tx;
  return tx.finish((events) => {
    const changes = events.flatMap((e) =>
      e.type === 'record.changed' ? [{ action: e.action, recordId: e.recordId, modelKey: e.modelKey }] : [],
    );
    const q = hookStatement(projectId, hooks, changes, userId);
    return q && { statements: [q.statement], events: q.events };
  });
}
