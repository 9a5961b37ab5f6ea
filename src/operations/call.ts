import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { announce, applyOutcome, failOrRetry, markAccepted, type ExecutionRow, type Outcome } from './store.ts';
import { EgressError, MAX_RESPONSE_BYTES, post, type EgressPolicy } from './egress.ts';
import { sign, type SigningSecrets } from './signing.ts';

/**
 * One call of an operation's endpoint (CONTRACT §9) and what its answer does to the execution:
 * 2xx JSON → completed, 202 → running (callbacks finish it), anything else → failed, past the
 * deadline → timed_out. Hook executions that fail go back to pending with back-off until their
 * attempts are used (store.failOrRetry).
 */
export interface CallDeps {
  sql: Sql;
  bus: EventBus;
  secrets: SigningSecrets;
  /** The lease owner: updates apply only while this worker still holds the execution. */
  owner: string;
  policy: EgressPolicy;
  /** Public base URL of the API: callbacks go to `<base>/v1/operations/executions/<id>/callback`. */
  baseUrl: string;
  retryBaseMs: number;
}

export type AbortReason = 'cancelled' | 'timeout' | 'shutdown' | 'superseded';
const BODY_IN_ERROR = 2000;

export function callbackUrl(baseUrl: string, id: string): string {
  return `${baseUrl}/v1/operations/executions/${id}/callback`;
}

/**
 * What a call came back with: the endpoint took it (202: callbacks finish it), an outcome to
 * write, or nothing to write (cancelled: already written; shutdown: handed back; superseded: a
 * newer attempt runs).
 */
export type Answer = { kind: 'accepted' } | { kind: 'outcome'; outcome: Outcome } | { kind: 'dropped' };

/** Calls the endpoint once; writes nothing (the execution's actor records the answer, `record`). */
export async function call(deps: CallDeps, row: ExecutionRow, signal: AbortSignal): Promise<Answer> {
  const payload = JSON.stringify({
    executionId: row.id,
    operationKey: row.operation_key,
    projectId: row.project_id,
    input: row.input ?? null,
    callbackUrl: callbackUrl(deps.baseUrl, row.id),
  });
  try {
    const { secret } = await deps.secrets.current(row.project_id);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'svc-operations',
      'x-svc-execution-id': row.id,
      // At-least-once: a call repeated after a lost lease carries the same key.
      'idempotency-key': row.id,
      'x-svc-signature': sign(secret, payload),
    };
    const res = await post(row.url, payload, headers, signal, deps.policy);
    if (res.status === 202) return { kind: 'accepted' };
    return { kind: 'outcome', outcome: interpret(res.status, res.body, res.truncated) };
  } catch (err) {
    const reason = signal.aborted ? (signal.reason as AbortReason) : null;
    // A cancel already wrote `cancelled`; a shutdown hands the execution back (dispatcher.stop);
    // superseded: this worker claimed the execution again for a newer attempt.
    if (reason === 'cancelled' || reason === 'shutdown' || reason === 'superseded') return { kind: 'dropped' };
    if (reason === 'timeout')
      return {
        kind: 'outcome',
        outcome: { status: 'timed_out', error: { reason: 'timeout', timeoutMs: row.timeout_ms } },
      };
    if (err instanceof EgressError)
      return {
        kind: 'outcome',
        outcome: { status: 'failed', error: { status: null, body: null, reason: err.reason, message: err.message } },
      };
    return {
      kind: 'outcome',
      outcome: {
        status: 'failed',
        error: {
          status: null,
          body: null,
          reason: 'unreachable',
          message: (err as Error).message?.slice(0, 300) ?? 'the call failed',
        },
      },
    };
  }
}

/** Writes what a call's answer means, under this worker's claim of that attempt, and announces it. */
export async function record(deps: CallDeps, row: ExecutionRow, answer: Answer): Promise<void> {
  if (answer.kind === 'dropped') return;
  if (answer.kind === 'accepted') {
    const moved = await markAccepted(deps.sql, row.id, deps.owner, row.attempts);
    if (moved) await announce(deps.bus, [moved]);
    return;
  }
  await finish(deps, row, answer.outcome);
}

function interpret(status: number, body: string, truncated: boolean): Outcome {
  if (truncated)
    return {
      status: 'failed',
      error: { status, body: null, reason: 'response_too_large', limitBytes: MAX_RESPONSE_BYTES },
    };
  let json: unknown;
  let isJson = true;
  try {
    json = body.trim() === '' ? null : JSON.parse(body);
  } catch {
    isJson = false;
  }
  if (status >= 200 && status < 300) {
    if (isJson) return { status: 'completed', result: json };
    return { status: 'failed', error: { status, body: body.slice(0, BODY_IN_ERROR), reason: 'invalid_json' } };
  }
  return { status: 'failed', error: { status, body: isJson ? json : body.slice(0, BODY_IN_ERROR) } };
}

async function finish(deps: CallDeps, row: ExecutionRow, o: Outcome): Promise<void> {
  const moved =
    row.trigger === 'hook' && (o.status === 'failed' || o.status === 'timed_out')
      ? await failOrRetry(
          deps.sql,
          row.id,
          { owner: deps.owner, attempt: row.attempts },
          o.status,
          o.error,
          deps.retryBaseMs,
        )
      : await applyOutcome(deps.sql, row.id, { owner: deps.owner, attempt: row.attempts }, o);
  if (moved) await announce(deps.bus, [moved]);
}
