import { randomBytes } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { EventBus, BusEvent } from '../bus/bus.ts';
import { BadUserInput, Conflict, NotFound } from '../errors.ts';

/**
 * The executions table (sql/013_operations.sql): every status move is one conditional UPDATE
 * (`where status in <non-terminal>`), so the first writer of a terminal status wins and a late
 * callback, a cancel or a stale worker cannot move a finished execution. Events go out after
 * the statement committed.
 */
export const STATUSES = ['pending', 'dispatched', 'running', 'completed', 'failed', 'cancelled', 'timed_out'] as const;
export type ExecutionStatus = (typeof STATUSES)[number];
export const TERMINAL: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled', 'timed_out']);
const LIVE = `('pending','dispatched','running')`;

export interface ExecutionRow {
  id: string;
  project_id: string;
  operation_key: string;
  url: string;
  status: ExecutionStatus;
  trigger: 'api' | 'hook' | 'schedule';
  trigger_key: string | null;
  input: unknown;
  progress_pct: number | null;
  progress_message: string | null;
  result: unknown;
  error: unknown;
  accepted: boolean;
  attempts: number;
  max_attempts: number;
  dead_letter: boolean;
  next_run_at: Date;
  lease_owner: string | null;
  lease_until: Date | null;
  deadline_at: Date | null;
  timeout_ms: number;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/** What clients see of an execution (GraphQL, CLI, events). */
export interface ExecutionView {
  id: string;
  projectId: string;
  operationKey: string;
  status: ExecutionStatus;
  trigger: string;
  triggerKey: string | null;
  progressPct: number | null;
  progressMessage: string | null;
  resultJson: unknown;
  errorJson: unknown;
  attempts: number;
  deadLetter: boolean;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

export function view(r: ExecutionRow): ExecutionView {
  return {
    id: r.id,
    projectId: r.project_id,
    operationKey: r.operation_key,
    status: r.status,
    trigger: r.trigger,
    triggerKey: r.trigger_key,
    progressPct: r.progress_pct,
    progressMessage: r.progress_message,
    resultJson: r.status === 'completed' ? r.result : null,
    errorJson: r.status === 'completed' ? null : r.error,
    attempts: r.attempts,
    deadLetter: r.dead_letter,
    createdAt: new Date(r.created_at).toISOString(),
    updatedAt: new Date(r.updated_at).toISOString(),
    finishedAt: r.finished_at ? new Date(r.finished_at).toISOString() : null,
  };
}

export function changeEvent(r: ExecutionRow): BusEvent {
  const v = view(r);
  return {
    type: 'execution.changed',
    projectId: r.project_id,
    executionId: r.id,
    operationKey: r.operation_key,
    status: r.status,
    // Spec: progressPct is null on terminal events.
    progressPct: TERMINAL.has(r.status) ? null : r.progress_pct,
    progressMessage: r.progress_message,
    resultJson: v.resultJson ?? null,
    errorJson: v.errorJson ?? null,
  };
}

export async function announce(bus: EventBus, rows: readonly ExecutionRow[]): Promise<void> {
  if (rows.length) await bus.publishAll(rows.map(changeEvent));
}

export function newExecutionId(): string {
  return `exe_${randomBytes(12).toString('hex')}`;
}

/** Hook executions are tried this often before they are dead-lettered. */
export const HOOK_ATTEMPTS = 5;
const MAX_INPUT_BYTES = 256 * 1024;

/** Checks an execution input: any JSON value, bounded in size. */
export function checkInput(input: unknown): unknown {
  if (input === undefined) return null;
  const text = JSON.stringify(input);
  if (text === undefined) throw new BadUserInput('input must be a JSON value');
  if (text.length > MAX_INPUT_BYTES) throw new BadUserInput(`input is larger than ${MAX_INPUT_BYTES / 1024} KiB`);
  return input;
}

/** Creates a pending execution of a pushed operation; NOT_FOUND when the project has no such operation. */
export async function createExecution(
  sql: Sql,
  p: {
    projectId: string;
    operationKey: string;
    input: unknown;
    trigger?: 'api' | 'schedule';
    triggerKey?: string | null;
    createdBy?: string | null;
    id?: string;
  },
): Promise<ExecutionRow> {
  const input = checkInput(p.input);
  const [row] = await sql<ExecutionRow[]>`
    insert into operation_executions (id, project_id, operation_key, url, trigger, trigger_key, input, timeout_ms, created_by)
    select ${p.id ?? newExecutionId()}, o.project_id, o.key, o.url, ${p.trigger ?? 'api'}, ${p.triggerKey ?? null},
           ${input === null ? null : sql.json(input as never)},
           operation_timeout_ms(o.definition),
           ${p.createdBy ?? null}
    from operations o where o.project_id = ${p.projectId} and o.key = ${p.operationKey}
    returning *`;
  if (!row) throw new NotFound(`Unknown operation "${p.operationKey}"`);
  return row;
}

export async function getExecution(sql: Sql, projectId: string, id: string): Promise<ExecutionRow | null> {
  const [row] = await sql<
    ExecutionRow[]
  >`select * from operation_executions where id = ${id} and project_id = ${projectId}`;
  return row ?? null;
}

/** Who started the execution (a customer id, or null), or null when the project has no such execution. */
export async function executionCreator(
  sql: Sql,
  projectId: string,
  id: string,
): Promise<{ createdBy: string | null } | null> {
  const [row] = await sql<
    { created_by: string | null }[]
  >`select created_by from operation_executions where id = ${id} and project_id = ${projectId}`;
  return row ? { createdBy: row.created_by } : null;
}

export interface ListFilter {
  status?: string;
  operationKey?: string;
  deadLetter?: boolean;
  limit?: number;
}

export async function listExecutions(sql: Sql, projectId: string, f: ListFilter = {}): Promise<ExecutionRow[]> {
  if (f.status !== undefined && !(STATUSES as readonly string[]).includes(f.status))
    throw new BadUserInput(`status must be one of ${STATUSES.join(', ')}`);
  const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
  return sql<ExecutionRow[]>`
    select * from operation_executions where project_id = ${projectId}
      ${f.status ? sql`and status = ${f.status}` : sql``}
      ${f.operationKey ? sql`and operation_key = ${f.operationKey}` : sql``}
      ${f.deadLetter ? sql`and dead_letter` : sql``}
    order by created_at desc, id desc limit ${limit}`;
}

/** Moves a live execution to `cancelled`; CONFLICT when it already finished. */
/**
 * Cancels a live execution. `createdBy`: only one started by that caller (a customer cancelling
 * their own through a public key); anyone else's is answered as not found, as it would be to a
 * reader who may not see it.
 */
export async function cancelExecution(
  sql: Sql,
  bus: EventBus,
  projectId: string,
  id: string,
  createdBy: string | null = null,
): Promise<ExecutionRow> {
  const [row] = await sql<ExecutionRow[]>`
    update operation_executions set status = 'cancelled', finished_at = now(), updated_at = now(),
      lease_owner = null, lease_until = null, progress_pct = null, progress_message = 'cancelled'
    where id = ${id} and project_id = ${projectId} and status in ${sql.unsafe(LIVE)}
      ${createdBy === null ? sql`` : sql`and created_by = ${createdBy}`} returning *`;
  if (row) {
    // The owning process hears this on the bus and aborts its HTTP call (dispatcher.ts).
    await announce(bus, [row]);
    return row;
  }
  const have = await getExecution(sql, projectId, id);
  if (!have || (createdBy !== null && have.created_by !== createdBy)) throw new NotFound(`Execution ${id} not found`);
  throw new Conflict(`Execution ${id} already finished (${have.status})`, { status: have.status });
}

export interface Outcome {
  status: 'completed' | 'failed' | 'timed_out' | 'running';
  result?: unknown;
  error?: unknown;
  progressPct?: number | null;
  progressMessage?: string | null;
}

/**
 * Who may move an execution: the worker holding the lease, for the attempt it claimed (a call's
 * own answer; a stale call of an earlier attempt, re-claimed since by the same worker, cannot
 * answer for the newer one). Null: a signed callback.
 */
export type Claim = { owner: string; attempt: number } | null;

function claimedBy(sql: Sql, c: Claim) {
  return c ? sql`and lease_owner = ${c.owner} and attempts = ${c.attempt}` : sql``;
}

/** Applies an outcome to a live execution (see Claim). Returns the row when it moved. */
export async function applyOutcome(sql: Sql, id: string, claim: Claim, o: Outcome): Promise<ExecutionRow | null> {
  const terminal = o.status !== 'running';
  const [row] = await sql<ExecutionRow[]>`
    update operation_executions set
      status = ${o.status},
      result = ${o.status === 'completed' && o.result !== undefined ? sql.json(o.result as never) : null},
      error = ${o.error !== undefined ? sql.json(o.error as never) : terminal ? null : sql`error`},
      progress_pct = ${terminal ? null : o.progressPct === undefined ? sql`progress_pct` : o.progressPct},
      progress_message = ${o.progressMessage === undefined ? sql`progress_message` : o.progressMessage},
      finished_at = ${terminal ? sql`now()` : null},
      lease_owner = ${terminal ? null : sql`lease_owner`},
      lease_until = ${terminal ? null : sql`lease_until`},
      updated_at = now()
    where id = ${id} and status in ${sql.unsafe(LIVE)} ${claimedBy(sql, claim)}
    returning *`;
  return row ?? null;
}

/** The endpoint answered 202: the call is over, callbacks (or the deadline) finish it. */
export async function markAccepted(sql: Sql, id: string, owner: string, attempt: number): Promise<ExecutionRow | null> {
  const [row] = await sql<ExecutionRow[]>`
    update operation_executions set status = 'running', accepted = true, lease_owner = null, lease_until = null, updated_at = now()
    where id = ${id} and status in ('dispatched', 'running') ${claimedBy(sql, { owner, attempt })} returning *`;
  return row ?? null;
}

/**
 * A failed hook call goes back to `pending` until its attempts are used, then to the dead letter.
 * `claim` is the worker holding the lease (its own call failed); null is a signed callback
 * reporting `failed` for a hook, which is retried the same way.
 */
export async function failOrRetry(
  sql: Sql,
  id: string,
  claim: Claim,
  status: 'failed' | 'timed_out',
  error: unknown,
  backoffMs: number,
): Promise<ExecutionRow | null> {
  const [row] = await sql<ExecutionRow[]>`
    update operation_executions set
      status = case when attempts < max_attempts then 'pending' else ${status} end,
      next_run_at = now() + (${backoffMs}::int * power(2, greatest(attempts - 1, 0))) * interval '1 millisecond',
      dead_letter = attempts >= max_attempts and trigger = 'hook',
      finished_at = case when attempts < max_attempts then null else now() end,
      error = ${sql.json(error as never)}, progress_pct = null,
      lease_owner = null, lease_until = null, accepted = false, updated_at = now()
    where id = ${id} and status in ('dispatched', 'running') ${claimedBy(sql, claim)} returning *`;
  return row ?? null;
}
