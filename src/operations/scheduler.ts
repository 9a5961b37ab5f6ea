import type { Cron } from 'croner';
import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { NotFound } from '../errors.ts';
import { cronOf, latestOccurrence } from './cron.ts';
import { announce, newExecutionId, type ExecutionRow } from './store.ts';
import { FailureLog } from '../store/failure-log.ts';

/**
 * Schedules (spec "schedules[]"): each tick finds, per enabled schedule, the latest occurrence
 * at or before now. When it is newer than the schedule's last run (or than the push that
 * created or last changed it; a push repeating it unchanged does not count), a row (project,
 * schedule, fire time) goes into schedule_runs with the execution in the same transaction. The
 * primary key makes each occurrence fire once across processes, and taking only the latest
 * occurrence makes a gap after downtime fire once, not N times.
 */
interface ScheduleRow {
  project_id: string;
  key: string;
  operation_key: string;
  cron: string;
  timezone: string;
  enabled: boolean;
  updated_at: Date;
  last_fire: Date | null;
}

const CRON_CACHE_MAX = 2000;
const crons = new Map<string, Cron | null>();

function cronFor(expression: string, timezone: string): Cron | null {
  const k = `${timezone}\0${expression}`;
  let c = crons.get(k);
  if (c === undefined) {
    try {
      c = cronOf(expression, timezone);
    } catch {
      c = null; // validated at push; a stored expression that no longer parses never fires
    }
    if (crons.size >= CRON_CACHE_MAX) crons.delete(crons.keys().next().value!);
    crons.set(k, c);
  }
  return c;
}

export interface ScheduleView {
  key: string;
  operationKey: string;
  cron: string;
  timezone: string;
  enabled: boolean;
  lastRunAt: string | null;
  nextRunAt: string | null;
}

export interface ScheduleRunView {
  scheduleKey: string;
  fireAt: string;
  manual: boolean;
  executionId: string | null;
  status: string | null;
}

async function createRun(
  tx: Sql,
  s: { project_id: string; key: string; operation_key: string },
  fireAt: Date,
  manual: boolean,
): Promise<{ run: ScheduleRunView; execution: ExecutionRow | null } | null> {
  const [inserted] = await tx<{ fire_at: Date }[]>`
    insert into schedule_runs (project_id, schedule_key, fire_at, manual) values (${s.project_id}, ${s.key}, ${fireAt}, ${manual})
    on conflict do nothing returning fire_at`;
  if (!inserted) return null;
  const input = { scheduleKey: s.key, fireAt: fireAt.toISOString(), manual };
  const [execution] = await tx<ExecutionRow[]>`
    insert into operation_executions (id, project_id, operation_key, url, trigger, trigger_key, input, timeout_ms)
    select ${newExecutionId()}, o.project_id, o.key, o.url, 'schedule', ${s.key}, ${tx.json(input)},
           operation_timeout_ms(o.definition)
    from operations o where o.project_id = ${s.project_id} and o.key = ${s.operation_key}
    returning *`;
  // A schedule whose operation is gone records the run without an execution (not retried).
  if (execution)
    await tx`update schedule_runs set execution_id = ${execution.id} where project_id = ${s.project_id} and schedule_key = ${s.key} and fire_at = ${fireAt}`;
  return {
    run: {
      scheduleKey: s.key,
      fireAt: fireAt.toISOString(),
      manual,
      executionId: execution?.id ?? null,
      status: execution?.status ?? null,
    },
    execution: execution ?? null,
  };
}

export class Scheduler {
  readonly #sql: Sql;
  readonly #bus: EventBus;
  readonly #clock: () => Date;
  #timer: ReturnType<typeof setInterval> | undefined;
  #ticking: Promise<unknown> | undefined;
  /** Failing ticks log one line a minute, not one per tick (database away). */
  readonly log = new FailureLog('scheduler');

  constructor(sql: Sql, bus: EventBus, clock: () => Date = () => new Date()) {
    this.#sql = sql;
    this.#bus = bus;
    this.#clock = clock;
  }

  start(tickMs: number): void {
    this.#timer ??= setInterval(() => {
      this.#ticking ??= this.tick()
        .then(
          () => this.log.ok(),
          (err) => this.log.fail(err),
        )
        .finally(() => (this.#ticking = undefined));
    }, tickMs);
    this.#timer.unref?.();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#ticking;
  }

  /** Fires every due occurrence (at most one per schedule); returns the runs this call created. */
  async tick(now = this.#clock()): Promise<ScheduleRunView[]> {
    const rows = await this.#sql<ScheduleRow[]>`
      select s.project_id, s.key, s.operation_key, s.cron, s.timezone, s.enabled, s.updated_at,
        (select max(r.fire_at) from schedule_runs r where r.project_id = s.project_id and r.schedule_key = s.key and not r.manual) as last_fire
      from schedules s where s.enabled`;
    const created: ScheduleRunView[] = [];
    const executions: ExecutionRow[] = [];
    for (const s of rows) {
      const cron = cronFor(s.cron, s.timezone);
      const due = cron && latestOccurrence(cron, now);
      const since = s.last_fire ?? s.updated_at;
      if (!due || due.getTime() <= since.getTime()) continue;
      const made = await this.#sql.begin((tx) => createRun(tx as unknown as Sql, s, due, false));
      if (made) {
        created.push(made.run);
        if (made.execution) executions.push(made.execution);
      }
    }
    await announce(this.#bus, executions);
    return created;
  }
}

/** `triggerSchedule(key)`: one run now, whatever the cron says (and even when disabled). */
export async function triggerSchedule(
  sql: Sql,
  bus: EventBus,
  projectId: string,
  key: string,
  now = new Date(),
): Promise<ScheduleRunView> {
  const [s] = await sql<
    ScheduleRow[]
  >`select project_id, key, operation_key, cron, timezone from schedules where project_id = ${projectId} and key = ${key}`;
  if (!s) throw new NotFound(`Unknown schedule "${key}"`);
  const cron = cronFor(s.cron, s.timezone);
  for (let i = 0; ; i++) {
    // Two triggers in the same millisecond get distinct rows.
    const at = new Date(now.getTime() + i);
    // Manual and scheduled runs share the key (schedule, fire time): a manual row at the instant
    // of an occurrence would make the scheduler's insert of that occurrence conflict on every
    // tick, so the occurrence would never fire. Such a trigger takes the next millisecond.
    if (cron && latestOccurrence(cron, at)?.getTime() === at.getTime()) continue;
    const made = await sql.begin((tx) => createRun(tx as unknown as Sql, s, at, true));
    if (made) {
      if (made.execution) await announce(bus, [made.execution]);
      return made.run;
    }
  }
}

export async function listSchedules(sql: Sql, projectId: string, now = new Date()): Promise<ScheduleView[]> {
  const rows = await sql<ScheduleRow[]>`
    select s.project_id, s.key, s.operation_key, s.cron, s.timezone, s.enabled, s.updated_at,
      (select max(r.fire_at) from schedule_runs r where r.project_id = s.project_id and r.schedule_key = s.key) as last_fire
    from schedules s where s.project_id = ${projectId} order by s.position, s.key`;
  return rows.map((s) => {
    const next = s.enabled ? (cronFor(s.cron, s.timezone)?.nextRun(now) ?? null) : null;
    return {
      key: s.key,
      operationKey: s.operation_key,
      cron: s.cron,
      timezone: s.timezone,
      enabled: s.enabled,
      lastRunAt: s.last_fire ? s.last_fire.toISOString() : null,
      nextRunAt: next ? next.toISOString() : null,
    };
  });
}

export async function listScheduleRuns(
  sql: Sql,
  projectId: string,
  scheduleKey: string | null,
  limit = 50,
): Promise<ScheduleRunView[]> {
  const rows = await sql<
    { schedule_key: string; fire_at: Date; manual: boolean; execution_id: string | null; status: string | null }[]
  >`
    select r.schedule_key, r.fire_at, r.manual, r.execution_id, e.status
    from schedule_runs r left join operation_executions e on e.id = r.execution_id
    where r.project_id = ${projectId} ${scheduleKey ? sql`and r.schedule_key = ${scheduleKey}` : sql``}
    order by r.fire_at desc limit ${Math.min(Math.max(limit, 1), 500)}`;
  return rows.map((r) => ({
    scheduleKey: r.schedule_key,
    fireAt: r.fire_at.toISOString(),
    manual: r.manual,
    executionId: r.execution_id,
    status: r.status,
  }));
}
