import type { Sql } from '../store/db.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
import type { ModelDef } from '../projects/types.ts';
import { SvcError } from '../errors.ts';
import { WriteTx, type Statement, type WriteCommitter } from '../content/tx.ts';
import {
  noRecordMessage,
  publishRecord,
  requiredKeys,
  searchKeys,
  unpublishRecord,
  type WriteContext,
  type WriteStep,
} from '../content/write.ts';
import { queueHooks } from '../content/hooks.ts';
import { auditOn, auditStatement, purgeAudit, type ActorKind } from './audit.ts';
import type { Localised } from './restore.ts';
import { FailureLog } from '../store/failure-log.ts';

/**
 * Fires due scheduled actions (docs/scheduling.md). Every `all`/`worker` process runs one; each
 * tick lists the due rows (a partial index on `at` of waiting rows) and fires them one by one.
 * A fire is ONE write transaction (src/content/tx.ts) that begins with the claim — an UPDATE
 * moving the row from 'scheduled' to 'done' — and then makes the change, so:
 *
 * - two processes claiming the same row serialise on its lock; the second finds it done and
 *   fires nothing (exactly once across processes);
 * - the change and the claim commit together, with the change's events (the same
 *   `record.changed` published/unpublished events a manual publish sends, which also drop
 *   cached reads in every process) and hooks; a change that fails (the record is gone, a
 *   required field is empty) rolls the claim back, and the row is then marked 'failed' with the
 *   error's message.
 *
 * Other action kinds plug in with `handle(action, fn)`: `fn` gets the due row and the worker's
 * parts and must fire through `claimStatement` as the first statement of its own transaction (a
 * WriteTx prelude, or `sql.begin`), throwing `AlreadyFired` when it claims nothing.
 *
 * Timed work kept in a table of its own runs on the same tick with `also(name, run)`: scheduled
 * releases (src/releases/schedule.ts), whose release row is both their schedule and their claim,
 * so they fire as promptly as scheduled publishes without a second row to keep in step.
 */
export interface DueAction {
  id: string;
  project_id: string;
  action: string;
  model_key: string | null;
  record_id: string | null;
  version: number | null;
  content: Localised | null;
  target: unknown;
  created_by_kind: ActorKind;
  created_by: string | null;
}

export interface WorkerDeps {
  sql: Sql;
  writes: WriteCommitter;
  project: (id: string) => Promise<ProjectSnapshot>;
}

export type ScheduledHandler = (due: DueAction, deps: WorkerDeps) => Promise<void>;

/** Another process fired (or a cancel took) the action first. */
export class AlreadyFired extends Error {}

/** The claim: the first statement of the transaction that fires `id`; answers its row or nothing. */
export function claimStatement(id: string): Statement {
  return {
    text: `update scheduled_actions set status = 'done', fired_at = now(), updated_at = now() where id = $1::text and status = 'scheduled' returning id`,
    params: [id],
  };
}

/** The statement publishing a version's content fixed when it was scheduled (sql/041). */
function publishContentStep(ctx: WriteContext, model: ModelDef, id: string, content: Localised): WriteStep {
  return {
    recordId: id,
    statements: [
      {
        text: `select svc_write_publish_content($1::text, $2::text, $3::text, $4::text, $5::text::jsonb, $6::text[], $7::text[], $8::text)`,
        params: [
          id,
          ctx.projectId,
          model.key,
          ctx.userId,
          JSON.stringify(content),
          requiredKeys(model),
          searchKeys(model),
          noRecordMessage(model, id),
        ],
      },
    ],
    event: { action: 'published', recordId: id, modelKey: model.key },
  };
}

/** publish / unpublish of one record, as the member or key that scheduled it. */
async function fireRecordAction(due: DueAction, deps: WorkerDeps): Promise<void> {
  const snapshot = await deps.project(due.project_id);
  const model = snapshot.models.find((m) => m.key === due.model_key);
  if (!model || !due.record_id) throw new SvcFailure(`Model "${due.model_key}" no longer exists`);
  const userId = due.created_by;
  const ctx: WriteContext = {
    projectId: snapshot.id,
    defaultLocale: snapshot.defaultLocale,
    userId,
    models: (k) => snapshot.models.find((m) => m.key === k),
  };
  const tx = new WriteTx({ projectId: snapshot.id, userId });
  const recordId = due.record_id;
  tx.prelude = {
    statement: claimStatement(due.id),
    // biome-ignore lint/suspicious/noThenProperty: a prelude is a plain record read by content/tx.ts, never awaited; `then` is its continuation
    then: (rows) => {
      if (rows.length === 0) throw new AlreadyFired();
      const step =
        due.action === 'unpublish'
          ? unpublishRecord(ctx, model, recordId)
          : due.content
            ? publishContentStep(ctx, model, recordId, due.content)
            : publishRecord(ctx, model, recordId);
      tx.write(step);
      if (auditOn()) {
        tx.follow(
          auditStatement(
            { projectId: snapshot.id, tenantId: snapshot.tenantId },
            { kind: due.created_by_kind, id: due.created_by },
            { requestId: due.id, ip: null, userAgent: 'svc scheduler' },
            [{ action: `record.${step.event.action}`, kind: 'record', id: recordId }],
          ),
        );
      }
    },
  };
  // Hooks run as they do for a manual publish (src/graphql/writes.ts newTx).
  queueHooks(tx, snapshot.id, snapshot.hooks, userId);
  await deps.writes.commit(tx);
}

/** A failure that is the action's own (not the database's): the action is marked failed. */
class SvcFailure extends SvcError {}

export class ScheduledActionWorker {
  readonly #deps: WorkerDeps;
  readonly #handlers = new Map<string, ScheduledHandler>([
    ['publish', fireRecordAction],
    ['unpublish', fireRecordAction],
  ]);
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticking: Promise<unknown> | undefined;
  #lastPurge = 0;
  /** Other due work fired on every tick (`also`), each with its own failure log. */
  readonly #also: { name: string; run: (now: Date) => Promise<unknown>; log: FailureLog }[] = [];
  /** Failing ticks log one line a minute, not one per tick (database away). */
  readonly log = new FailureLog('scheduled actions');
  /** Fires this process made (tests and /metrics). */
  fired = 0;

  constructor(
    deps: WorkerDeps,
    readonly opts: { tickMs: number; purgeEveryMs: number } = { tickMs: 250, purgeEveryMs: 3600_000 },
  ) {
    this.#deps = deps;
  }

  /** Adds an action kind (releases: `handle('release', fire)`). */
  handle(action: string, fn: ScheduledHandler): void {
    this.#handlers.set(action, fn);
  }

  /**
   * Adds due work to every tick, after the scheduled actions: `run(now)` fires what is due and
   * must itself make each firing happen once across processes (every worker ticks). A failing
   * `run` neither stops the actions nor the other work of the tick.
   */
  also(name: string, run: (now: Date) => Promise<unknown>): void {
    this.#also.push({ name, run, log: new FailureLog(`scheduled actions (${name})`) });
  }

  start(): void {
    this.#timer ??= setInterval(() => {
      this.#ticking ??= this.tick()
        .then(
          () => this.log.ok(),
          (err) => this.log.fail(err),
        )
        .then(() => this.#runAlso())
        .finally(() => (this.#ticking = undefined));
    }, this.opts.tickMs);
    this.#timer.unref?.();
  }

  async #runAlso(): Promise<void> {
    for (const a of this.#also) {
      try {
        await a.run(new Date());
        a.log.ok();
      } catch (err) {
        a.log.fail(err);
      }
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#ticking;
  }

  /** Fires what is due; answers how many this call fired. Also purges the audit log once in a while. */
  async tick(): Promise<number> {
    const due = await this.#deps.sql<DueAction[]>`
      select id, project_id, action, model_key, record_id, version, content, target, created_by_kind, created_by
      from scheduled_actions where status = 'scheduled' and at <= now() order by at limit 50`;
    let n = 0;
    for (const d of due) if (await this.#fire(d)) n++;
    if (Date.now() - this.#lastPurge >= this.opts.purgeEveryMs) {
      this.#lastPurge = Date.now();
      while ((await purgeAudit(this.#deps.sql)) > 0) {
        /* batches until none is left */
      }
    }
    return n;
  }

  async #fire(d: DueAction): Promise<boolean> {
    const handler = this.#handlers.get(d.action);
    if (!handler) return false; // a kind this process does not know (an older version): another fires it
    try {
      await handler(d, this.#deps);
      this.fired++;
      return true;
    } catch (err) {
      if (err instanceof AlreadyFired) return false;
      if (!(err instanceof SvcError)) throw err; // the database: the action stays, the next tick retries
      await this.#deps.sql`
        update scheduled_actions set status = 'failed', error = ${err.message.slice(0, 1000)}, updated_at = now()
        where id = ${d.id} and status = 'scheduled'`;
      return false;
    }
  }
}
