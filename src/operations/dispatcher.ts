import { randomBytes } from 'node:crypto';
import type { BusEvent } from '../bus/bus.ts';
import { announce, TERMINAL, type ExecutionRow } from './store.ts';
import type { CallDeps } from './call.ts';
import type { Executions } from './execution-actor.ts';
import { FailureLog } from '../store/failure-log.ts';
import { ROUND_DEADLINE_MS, withDeadline } from '../store/tick.ts';

/**
 * Claims pending executions and hands each to its actor (execution-actor.ts: one mailbox, one
 * call, one deadline timer), on the process's execution registry. Runs in processes with SVC_ROLE all or worker. The database is
 * the queue: a claim is one statement with FOR UPDATE SKIP LOCKED, so processes never take the
 * same row; a claim carries a lease this worker renews while the call is in flight, and a row
 * whose lease ran out (the process died) is claimed again by anyone (at-least-once).
 *
 * Fairness: a project with `projectConcurrency` calls in flight (across processes) is skipped
 * until one finishes, so one tenant's backlog cannot starve the others. The claim is one call of
 * `operations_claim` (sql/026), which takes a transaction-scoped advisory lock shared by every
 * dispatcher before it counts and claims: two processes claiming at the same instant otherwise
 * both saw the project below its cap (each statement's snapshot missed the other's uncommitted
 * claim) and overshot it.
 *
 * A lost lease is claimed again at most `leaseAttempts` times (counting the first claim; hooks
 * at least their retry attempts); after that the sweep ends the execution `failed` with
 * `reason: worker_lost` (dead-lettered for hooks), so an execution whose call kills its worker
 * cannot take the fleet down in turn forever.
 */
export interface DispatcherOptions {
  leaseMs: number;
  leaseAttempts: number;
  pollMs: number;
  projectConcurrency: number;
  /** Calls in flight in this process at most. */
  capacity: number;
}

export class Dispatcher {
  readonly owner = `wrk_${randomBytes(8).toString('hex')}`;
  readonly #deps: CallDeps;
  readonly #opts: DispatcherOptions;
  readonly #executions: Executions;
  /** Calls in flight in this process (claimed, not yet answered). */
  #calling = 0;
  #stopped = true;
  #wake: (() => void) | null = null;
  /** Failing rounds log one line a minute, not one per poll (database away). */
  readonly log = new FailureLog('operations dispatcher');
  #poked = false;
  #loop: Promise<void> | undefined;
  #leaseTimer: ReturnType<typeof setInterval> | undefined;
  #unsubscribe: (() => void) | undefined;
  #lastSweep = 0;

  constructor(deps: Omit<CallDeps, 'owner'>, executions: Executions, opts: DispatcherOptions) {
    this.#deps = { ...deps, owner: this.owner };
    this.#executions = executions;
    this.#opts = opts;
  }

  /** The API's public address for callback URLs (known only after listen with PORT=0). */
  setBaseUrl(url: string): void {
    this.#deps.baseUrl = url;
  }

  get inFlight(): number {
    return this.#calling;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#unsubscribe = this.#deps.bus.subscribe((e) => this.#onEvent(e));
    this.#leaseTimer = setInterval(() => void this.#renew(), Math.max(50, Math.floor(this.#opts.leaseMs / 3)));
    this.#leaseTimer.unref?.();
    this.#loop = this.#run();
  }

  /** Wakes the claim loop (a new pending execution somewhere). */
  poke(): void {
    this.#poked = true;
    this.#wake?.();
  }

  #onEvent(e: BusEvent): void {
    if (e.type !== 'execution.changed') return;
    // A `pending` event may arrive after this worker already claimed the row (events are
    // asynchronous): it only wakes the claim loop, it never touches a call in flight.
    if (e.status === 'pending') this.poke();
    else if (TERMINAL.has(e.status)) {
      // Cancelled (or finished by a callback) while our call is in flight: stop the call.
      this.#executions.tellIfLive(e.executionId, { kind: 'stop', reason: 'cancelled' });
      this.poke();
    }
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      let claimed = 0;
      try {
        // One hung query does not stop the loop (store/tick.ts).
        claimed = await withDeadline(this.#round(), ROUND_DEADLINE_MS, 'the claim round');
        this.log.ok();
      } catch (err) {
        if (!this.#stopped) this.log.fail(err);
      }
      if (this.#stopped) break;
      if (claimed > 0 && this.#calling < this.#opts.capacity) continue;
      await this.#sleep(this.#opts.pollMs);
    }
  }

  async #round(): Promise<number> {
    const now = Date.now();
    if (now - this.#lastSweep >= this.#opts.pollMs) {
      this.#lastSweep = now;
      await this.#sweep();
    }
    return this.#claim();
  }

  #sleep(ms: number): Promise<void> {
    if (this.#poked) {
      this.#poked = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.#wake = () => {
        this.#wake = null;
        this.#poked = false;
        done();
      };
    });
  }

  async #claim(): Promise<number> {
    const room = this.#opts.capacity - this.#calling;
    if (room <= 0) return 0;
    // One statement (sql/026_operations_claim.sql): the advisory lock every dispatcher takes,
    // then the claim under a snapshot taken after it, so `busy` counts every committed claim.
    const rows = await this.#deps.sql<ExecutionRow[]>`
      select * from operations_claim(${this.owner}, ${room}, ${this.#opts.projectConcurrency}, ${this.#opts.leaseAttempts}, ${this.#opts.leaseMs})`;
    if (!rows.length) return 0;
    for (const row of rows) await this.#start(row);
    await announce(this.#deps.bus, rows);
    return rows.length;
  }

  async #start(row: ExecutionRow): Promise<void> {
    this.#calling++;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      this.#calling--;
      if (!this.#stopped) this.poke();
    };
    await this.#executions.tell(row.id, { kind: 'claimed', row, deps: this.#deps, ended: end });
  }

  /** Keeps the leases of in-flight calls; runs every leaseMs / 3. */
  async #renew(): Promise<void> {
    if (this.#calling === 0) return;
    await this.#deps.sql`
      update operation_executions set lease_until = now() + ${this.#opts.leaseMs}::int * interval '1 millisecond'
      where lease_owner = ${this.owner} and status in ('dispatched', 'running') and not accepted`.catch(() => {});
  }

  /**
   * Any worker may do it: executions waiting for callbacks past their deadline time out (a hook
   * goes back to pending while it has attempts left, like a failed call), and executions whose
   * lease ran out after their last allowed claim fail with reason worker_lost.
   */
  async #sweep(): Promise<void> {
    const { sql } = this.#deps;
    const backoff = this.#deps.retryBaseMs;
    const timedOut = await sql<ExecutionRow[]>`
      update operation_executions set
        status = case when trigger = 'hook' and attempts < max_attempts then 'pending' else 'timed_out' end,
        next_run_at = now() + (${backoff}::int * power(2, greatest(attempts - 1, 0))) * interval '1 millisecond',
        dead_letter = trigger = 'hook' and attempts >= max_attempts,
        finished_at = case when trigger = 'hook' and attempts < max_attempts then null else now() end,
        accepted = case when trigger = 'hook' and attempts < max_attempts then false else accepted end,
        updated_at = now(), progress_pct = null,
        error = jsonb_build_object('reason', 'timeout', 'timeoutMs', timeout_ms)
      where id in (
        select id from operation_executions
        where status in ('dispatched', 'running') and accepted and deadline_at < now()
        limit 500 for update skip locked)
      returning *`;
    await announce(this.#deps.bus, timedOut);
    const lost = await sql<ExecutionRow[]>`
      update operation_executions set status = 'failed', finished_at = now(), updated_at = now(), progress_pct = null,
        lease_owner = null, lease_until = null, dead_letter = trigger = 'hook',
        error = jsonb_build_object('reason', 'worker_lost', 'attempts', attempts,
          'message', 'the worker running this execution stopped mid-call on every attempt')
      where id in (
        select id from operation_executions
        where status in ('dispatched', 'running') and not accepted and lease_until < now()
          and attempts >= greatest(max_attempts, ${this.#opts.leaseAttempts})
        limit 500 for update skip locked)
      returning *`;
    await announce(this.#deps.bus, lost);
  }

  /** Stops claiming, aborts calls in flight and hands their executions back for others to claim. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#unsubscribe?.();
    clearInterval(this.#leaseTimer);
    this.#wake?.();
    await this.#loop;
    await Promise.all(
      this.#executions
        .live()
        .filter((a) => a.calling)
        .map((a) => a.ask({ kind: 'stop', reason: 'shutdown' }).catch(() => {})),
    );
    const back = await this.#deps.sql<ExecutionRow[]>`
      update operation_executions set status = 'pending', lease_owner = null, lease_until = null, attempts = greatest(attempts - 1, 0), updated_at = now()
      where lease_owner = ${this.owner} and status in ('dispatched', 'running') and not accepted returning *`.catch(
      () => [] as ExecutionRow[],
    );
    await announce(this.#deps.bus, back).catch(() => {});
  }
}
