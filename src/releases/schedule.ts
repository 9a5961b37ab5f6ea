import type { Sql } from '../store/db.ts';
import type { WriteCommitter } from '../content/tx.ts';
import { SvcError } from '../errors.ts';
import { publishRelease, type PublishTarget } from './publish.ts';

/**
 * `scheduleRelease(id, at)`: the release clock. It runs on the scheduled-actions worker's tick
 * (`ScheduledActionWorker.also`, src/editorial/schedule-worker.ts: every
 * `SVC_SCHEDULED_ACTIONS_TICK_MS`, default 250 ms, in processes with role `all` or `worker`), so a
 * release goes live within about a second of its `at`, as a scheduled publish does. Once across
 * processes, like a scheduled action: an action is claimed by the update of its own row in the
 * transaction that fires it; a release is claimed by its own row, locked FOR UPDATE in the
 * transaction that publishes it (publish.ts), whose status moves from `scheduled` to `published`
 * in that same commit. A second process waits on the lock, then finds the release no longer due
 * and does nothing. The release row stays the one record of its schedule (no `scheduled_actions`
 * row beside it): rescheduling, discarding and publishing by hand change that row alone.
 *
 * A release that cannot go live (a required field left empty since) is opened again with the
 * reason in `error`, rather than retried every tick.
 */
export class ReleaseClock {
  constructor(
    private readonly deps: { sql: Sql; writes: WriteCommitter; target: (projectId: string) => Promise<PublishTarget> },
  ) {}

  /** Publishes the due releases (oldest first, at most `max` per tick); returns the ids this process published. */
  async tick(now = new Date(), max = 50): Promise<string[]> {
    const due = await this.deps.sql<{ id: string; project_id: string }[]>`
      select id, project_id from releases where status = 'scheduled' and at <= ${now} order by at, id limit ${max}`;
    const done: string[] = [];
    for (const r of due) {
      try {
        await publishRelease(this.deps.writes, await this.deps.target(r.project_id), r.id, null, {
          onlyScheduledBy: now,
        });
        done.push(r.id);
      } catch (err) {
        // Another process published (or someone discarded or rescheduled) it first: not ours.
        if (
          err instanceof SvcError &&
          err.code === 'CONFLICT' &&
          /no longer due|is published|is discarded/.test(err.message)
        )
          continue;
        const reason = err instanceof SvcError ? err.message : 'the release could not be published';
        if (!(err instanceof SvcError)) console.error('release clock:', (err as Error).message);
        await this.deps
          .sql`update releases set status = 'open', at = null, error = ${reason.slice(0, 500)}, updated_at = now()
          where id = ${r.id} and status = 'scheduled' and at <= ${now}`;
      }
    }
    return done;
  }
}
