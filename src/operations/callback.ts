import { BadUserInput, Conflict, NotFound, PayloadTooLarge, Unauthenticated } from '../errors.ts';
import { TERMINAL, type ExecutionRow, type ExecutionView, type Outcome } from './store.ts';
import type { SigningSecrets } from './signing.ts';
import { MAX_RESPONSE_BYTES } from './egress.ts';
import type { CallbackDeps, Executions } from './execution-actor.ts';

/**
 * Progress callbacks (CONTRACT §9): an endpoint that answered 202 POSTs
 * `{ status?, progressPct?, progressMessage?, result?, error? }` to its callbackUrl, signed
 * like the call. Bad signature → 401, unknown execution → 404, finished execution → 409,
 * malformed body → 400; never a change to the execution. A hook execution reported `failed` goes
 * back to `pending` while it has attempts left (store.failOrRetry).
 */
const CALLBACK_STATUSES = new Set(['running', 'completed', 'failed']);

export async function applyCallback(
  deps: { secrets: SigningSecrets; executions: Executions } & CallbackDeps,
  id: string,
  raw: string,
  signature: string | null,
): Promise<ExecutionView> {
  if (raw.length > MAX_RESPONSE_BYTES)
    throw new PayloadTooLarge(`A callback body holds at most ${MAX_RESPONSE_BYTES} bytes`);
  const [row] = await deps.sql<ExecutionRow[]>`select * from operation_executions where id = ${id}`;
  if (!row) throw new NotFound(`Execution ${id} not found`);
  if (!(await deps.secrets.verify(row.project_id, signature, raw))) {
    throw new Unauthenticated('X-Svc-Signature is missing, expired or does not match the project signing secret');
  }
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new BadUserInput('The callback body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadUserInput('The callback body must be a JSON object');
  const status = body.status ?? 'running';
  if (typeof status !== 'string' || !CALLBACK_STATUSES.has(status))
    throw new BadUserInput('status must be running, completed or failed');
  const pct = body.progressPct;
  if (pct !== undefined && pct !== null && (typeof pct !== 'number' || !Number.isFinite(pct) || pct < 0 || pct > 100)) {
    throw new BadUserInput('progressPct must be a number from 0 to 100');
  }
  const message = body.progressMessage;
  if (message !== undefined && message !== null && (typeof message !== 'string' || message.length > 1000)) {
    throw new BadUserInput('progressMessage must be a string of at most 1000 characters');
  }
  if (TERMINAL.has(row.status))
    throw new Conflict(`Execution ${id} already finished (${row.status})`, { status: row.status });
  const outcome: Outcome =
    status === 'completed'
      ? {
          status: 'completed',
          result: body.result ?? null,
          progressMessage: (message as string | undefined) ?? undefined,
        }
      : status === 'failed'
        ? {
            status: 'failed',
            error: body.error ?? { reason: 'reported_by_endpoint' },
            progressMessage: (message as string | undefined) ?? undefined,
          }
        : {
            status: 'running',
            progressPct: pct === undefined ? undefined : pct === null ? null : Math.round(pct as number),
            progressMessage: message === undefined ? undefined : (message as string | null),
          };
  // Written by the execution's actor in this process, in order with its call's own answer.
  return deps.executions.ask(id, { kind: 'callback', row, outcome });
}
