/**
 * A bound on one round of a loop that retries against the database (scheduled actions and their
 * `also` work, the operations scheduler and dispatcher, the bus's outbox relay). Each round waits
 * on queries; one that never settles would stop the loop for good — scheduled publishes and
 * releases, schedules, executions, event relays — until the process restarts. postgres.js has
 * done that (store/pg-socket.ts, store/db.ts typesOnce); whatever else might, a round that is not
 * done by its deadline counts as a failed one (FailureLog) and the loop goes on with its next
 * round. The late round is not cancelled (a query cannot be taken back from a pool) and keeps
 * only what it holds; the work of every loop is safe to overlap (claims and locks make each
 * firing, run and relay happen once).
 */
export class DeadlineExceeded extends Error {}

/**
 * A round of any loop is a handful of statements (a scheduled-actions tick fires at most 50
 * actions, one transaction each, ~5 ms apiece here); a minute is far past any healthy round and
 * short next to a failover.
 */
export const ROUND_DEADLINE_MS = 60_000;

/** `work`, or a DeadlineExceeded rejection once `ms` passed without it settling. */
export function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new DeadlineExceeded(`${what} still running after ${ms} ms; the loop goes on`)),
      ms,
    );
    timer.unref?.();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
