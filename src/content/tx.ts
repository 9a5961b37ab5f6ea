import type { BusEvent, EventBus } from '../bus/bus.ts';
import type { ContentSql } from '../store/db.ts';
import type { RecordAction } from './types.ts';
import type { ModelDef } from '../projects/types.ts';
import { inline, literal } from './sql-literal.ts';
import { parseLsn } from '../store/lsn.ts';
import { clientError, dbError, type ErrorReading } from './db-errors.ts';
import { executeText, preparedName, UNDEFINED_PSTATEMENT } from './prepared.ts';

/** Parameters travel inlined as literals (sql-literal.ts); re-exported for the statements' builders. */
export { inline, literal };

/**
 * Write transactions (issue 11). A `WriteTx` is built in JS without I/O — the statements of its
 * writes, any follow-up statements (an outbox row, a hook's queue entry) and statements whose
 * rows the caller reads back — and `WriteCommitter.commit` sends it in one go:
 *
 *   BEGIN; <statements…>; select pg_notify(…) — once, every event; COMMIT
 *
 * pipelined on one connection, so PostgreSQL never waits on the service inside an open
 * transaction, and a write costs one commit. A statement that fails aborts the transaction and
 * the pipelined COMMIT then rolls it back: a failed write changes nothing and announces nothing.
 *
 * Group commit: transactions submitted while others are in flight are sent together as one
 * transaction (one commit, one NOTIFY). NOTIFY serialises committing transactions on a
 * database-wide lock held through the WAL flush, so one NOTIFY per group rather than per write
 * is what lets writes scale (docs/decisions.md); the NOTIFY stays inside the transaction so
 * committed listeners (realtime) hear every write in commit order. If a group fails, each of
 * its transactions is run again alone, so one bad write never fails another. How a failure
 * reads to the client is db-errors.ts; the names of statements sent as EXECUTE, prepared.ts.
 */
export interface PendingEvent {
  action: RecordAction;
  recordId: string;
  modelKey: string;
}

/** One write: its statements, in order, and the change it announces after the commit. */
export interface WriteStep {
  recordId: string;
  statements: Statement[];
  event: PendingEvent;
  /**
   * Which of `statements` answers with the record as this write left it (the working content of
   * the write's locale; sql/027_write_rows.sql), so a mutation needs no read-back statement.
   */
  row?: number;
  /** A create's checked row, so consecutive creates can go as one statement (import.ts createMany). */
  created?: { model: ModelDef; naturalKey: string | null; locale: string; data: Record<string, unknown>; id: string };
}

export interface Statement {
  text: string;
  params: unknown[];
  /** This statement's own reading of a database error (a duplicate natural key is a CONFLICT). */
  mapError?: ErrorReading;
  /**
   * Sent as `EXECUTE` of a statement each connection prepares once (`WriteCommitter`), not as
   * its text: PostgreSQL then neither parses, analyses nor plans the call again. For statements
   * sent often whose parameters' types all show in the text (`$1::text`).
   */
  prepared?: boolean;
}

/** Where a statement's rows will be once the transaction committed. */
export interface Handle<T> {
  readonly index: number;
  readonly _rows?: T;
}

/**
 * Statements to append to a write transaction, from its record events (an outbox row per
 * change, queued hooks), with the events those add. Runs when the transaction is sent.
 */
export type Follower = (events: readonly BusEvent[]) => { statements: Statement[]; events?: BusEvent[] } | undefined;

export class WriteTx {
  readonly statements: Statement[] = [];
  readonly events: BusEvent[] = [];
  /**
   * The one case that reads before it can build: batch operations addressed by `_id` alone need
   * the records' models to check their data. Sent with BEGIN; `then` adds the writes. Such a
   * transaction runs alone (never grouped) and waits on JS once, for `then`.
   */
  prelude: { statement: Statement; then: (rows: Record<string, unknown>[]) => void } | undefined;

  constructor(readonly ctx: { projectId: string; userId: string | null }) {}

  /** Adds one record write and its change event. */
  write(step: WriteStep): this {
    this.statements.push(...step.statements);
    this.events.push({
      type: 'record.changed',
      projectId: this.ctx.projectId,
      action: step.event.action,
      recordId: step.event.recordId,
      modelKey: step.event.modelKey,
      userId: this.ctx.userId,
    });
    return this;
  }

  /** Adds one record write whose own statement answers with the record (`WriteStep.row`). */
  written<T>(step: WriteStep & { row: number }): Handle<T> {
    const index = this.statements.length + step.row;
    this.write(step);
    return { index };
  }

  /** Adds a statement whose rows are wanted back (the written record, read inside the transaction). */
  read<T>(statement: Statement): Handle<T> {
    this.statements.push(statement);
    return { index: this.statements.length - 1 };
  }

  /** Adds a statement that must commit with the writes (an outbox row, a queued hook). */
  follow(statement: Statement): this {
    this.statements.push(statement);
    return this;
  }

  /** Adds statements built from this transaction's events once its writes are all known. */
  finish(fn: Follower): this {
    this.finishers.push(fn);
    return this;
  }

  readonly finishers: Follower[] = [];
}

export interface Committed {
  rows<T>(handle: Handle<T>): T[];
}

interface Unit {
  tx: WriteTx;
  /** Statements after the followers ran: the tx's own, then theirs (the tx's own list when none added any). */
  all: readonly Statement[];
  /** Its events and the followers' (likewise). */
  events: readonly BusEvent[];
  resolve: (c: Committed) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: true; results: unknown[][]; lsn: number } | { ok: false; error: unknown; rolledBack: boolean };

type Conn = Awaited<ReturnType<ContentSql['reserve']>>;

export interface CommitterOptions {
  /** Transactions in flight at once (connections held). */
  inFlight?: number;
  /** Most transactions per group. */
  maxGroup?: number;
  /** Most statements per group (a group never splits a transaction). */
  maxStatements?: number;
  /**
   * Hears each committed group's events with its commit LSN, before they are delivered here
   * (read replicas, store/replicas.ts). Set, every transaction asks PostgreSQL for its position
   * in the same message, after COMMIT: no extra round trip.
   */
  committed?: (events: readonly BusEvent[], lsn: number) => void;
}

export class WriteCommitter {
  readonly #queue: Unit[] = [];
  readonly #followers: Follower[] = [];
  readonly #inFlightMax: number;
  readonly #maxGroup: number;
  readonly #maxStatements: number;
  readonly #committed: CommitterOptions['committed'];
  #inFlight = 0;
  #idle: (() => void)[] = [];
  #closed = false;
  /** Transactions and groups committed (tests and the bench read these). */
  readonly stats = { transactions: 0, groups: 0, retriedAlone: 0 };

  constructor(
    private readonly sql: ContentSql,
    private readonly bus: EventBus,
    opts: CommitterOptions = {},
  ) {
    this.#inFlightMax = opts.inFlight ?? Number(process.env.SVC_WRITE_INFLIGHT || 2);
    this.#maxGroup = opts.maxGroup ?? 64;
    this.#maxStatements = opts.maxStatements ?? 5_000;
    this.#committed = opts.committed;
  }

  /** Adds statements to every write transaction from now on (see `Follower`). */
  follow(fn: Follower): () => void {
    this.#followers.push(fn);
    return () => void this.#followers.splice(this.#followers.indexOf(fn) >>> 0, 1);
  }

  /** Commits `tx` (possibly together with others); rejects with the write's error if it fails. */
  commit(tx: WriteTx): Promise<Committed> {
    if (this.#closed) return Promise.reject(new Error('the service is shutting down'));
    return new Promise((resolve, reject) => {
      this.#queue.push({ tx, all: [], events: [], resolve, reject });
      this.#pump();
    });
  }

  /** Stops taking transactions and waits for those in flight. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#inFlight > 0 || this.#queue.length > 0) await new Promise<void>((r) => this.#idle.push(r));
  }

  #pump(): void {
    while (this.#inFlight < this.#inFlightMax && this.#queue.length > 0) {
      const group = this.#take();
      this.#inFlight++;
      void this.#run(group).finally(() => {
        this.#inFlight--;
        this.#pump();
        if (this.#inFlight === 0 && this.#queue.length === 0) for (const r of this.#idle.splice(0)) r();
      });
    }
  }

  #take(): Unit[] {
    const first = this.#queue.shift()!;
    if (first.tx.prelude) return [first];
    const group = [first];
    let statements = first.tx.statements.length;
    while (group.length < this.#maxGroup && this.#queue.length > 0) {
      const next = this.#queue[0]!;
      if (next.tx.prelude || statements + next.tx.statements.length > this.#maxStatements) break;
      statements += next.tx.statements.length;
      group.push(this.#queue.shift()!);
    }
    return group;
  }

  async #run(units: Unit[]): Promise<void> {
    let conn: Conn;
    try {
      conn = await this.sql.reserve();
    } catch (err) {
      for (const u of units) u.reject(err);
      return;
    }
    try {
      const outcome = await this.#attempt(conn, units);
      if (outcome.ok) return this.#settle(units, outcome.results, outcome.lsn);
      if (units.length > 1 && outcome.rolledBack) {
        // Some transaction of the group failed and took the others with it: each alone now.
        this.stats.retriedAlone += units.length;
        for (const u of units) {
          const alone = await this.#attempt(conn, [u]);
          if (alone.ok) this.#settle([u], alone.results, alone.lsn);
          else u.reject(alone.error);
        }
        return;
      }
      for (const u of units) u.reject(outcome.error);
    } finally {
      conn.release();
    }
  }

  #settle(units: Unit[], results: unknown[][], lsn: number): void {
    this.stats.groups++;
    this.stats.transactions += units.length;
    if (this.#committed)
      this.#committed(
        units.flatMap((u) => u.events),
        lsn,
      );
    // This process's caches hear of the changes once they are durable; others through the
    // NOTIFY, which the bus' relay sends from the outbox after the commit. The write is answered
    // without waiting for that: whatever its client does next gets a later outbox id (and events
    // published on the bus go through the outbox too), so it is heard after the write's events.
    void this.bus.deliverLocal(units.flatMap((u) => u.events));
    let at = 0;
    for (const u of units) {
      const mine = results.slice(at, at + u.all.length);
      at += u.all.length;
      u.resolve({ rows: <T>(h: Handle<T>) => (mine[h.index] ?? []) as T[] });
    }
  }

  /**
   * `prepare`: the statements sent as EXECUTE are prepared first, inside the transaction
   * (svc_prepare, sql/029_write_pg_cost.sql: a statement this connection already has is kept).
   * A connection learns that it lacks one from the EXECUTE's error, once per statement, and the
   * transaction is sent again; that failed attempt rolled back and committed nothing.
   */
  async #attempt(conn: Conn, units: Unit[], prepare = false): Promise<Outcome> {
    let text = 'begin';
    const only = units.length === 1 ? units[0]! : undefined;
    if (only?.tx.prelude) {
      const pre = only.tx.prelude;
      try {
        const [, rows] = (await conn.unsafe(`begin;\n${inline(pre.statement)}`)) as unknown as [
          unknown,
          Record<string, unknown>[],
        ];
        pre.then([...rows]);
      } catch (err) {
        await conn.unsafe('rollback').catch(() => {});
        return {
          ok: false,
          error: clientError(err, [pre.statement]),
          rolledBack: dbError(err) !== undefined || !(err instanceof Error && 'errno' in err),
        };
      }
      text = '';
    }
    const events: BusEvent[] = [];
    const statements: Statement[] = [];
    for (const u of units) {
      // The transaction's own lists unless a follower adds to them (copied then, so a retry alone
      // starts from the transaction's own again): two copies per mutation less.
      let all = u.tx.statements;
      let added = u.tx.events;
      for (const list of [u.tx.finishers, this.#followers]) {
        for (const f of list) {
          const more = f(u.tx.events);
          if (!more) continue;
          if (all === u.tx.statements) all = [...all];
          if (added === u.tx.events) added = [...added];
          all.push(...more.statements);
          added.push(...(more.events ?? []));
        }
      }
      u.all = all;
      u.events = added;
      statements.push(...all);
      events.push(...added);
    }
    const parts = text ? [text] : [];
    // A prelude's transaction is open before this message is built: it is never sent twice, so
    // its statements go as text.
    const executes = !only?.tx.prelude;
    if (prepare) {
      const texts = new Set(statements.filter((st) => st.prepared).map((st) => st.text));
      for (const t of texts) parts.push(`select svc_prepare(${literal(preparedName(t))}, ${literal(t)})`);
    }
    const prepares = parts.length - (text ? 1 : 0);
    for (const st of statements) parts.push(executes && st.prepared ? executeText(st) : inline(st));
    parts.push(...this.bus.statements(events, literal));
    parts.push('commit');
    // The flushed WAL position after COMMIT: at or past the commit record (flushed before COMMIT
    // returns, with synchronous_commit on), and never ahead of what a replica can be sent (the
    // write position may hold other sessions' WAL the WAL writer has yet to flush).
    if (this.#committed) parts.push('select pg_current_wal_flush_lsn()::text as lsn');
    let results: unknown[][];
    try {
      results = (await conn.unsafe(parts.join(';\n'))) as unknown as unknown[][];
    } catch (err) {
      // A failed statement aborted the transaction and skipped the rest, COMMIT included.
      const db = dbError(err);
      if (db) await conn.unsafe('rollback').catch(() => {});
      if (db?.code === UNDEFINED_PSTATEMENT && executes && !prepare) return this.#attempt(conn, units, true);
      // Without the server's answer the outcome is unknown (the connection failed): never retried.
      return { ok: false, error: clientError(err, statements), rolledBack: db !== undefined };
    }
    const start = (text ? 1 : 0) + prepares;
    const lsn = this.#committed
      ? parseLsn((results[results.length - 1] as unknown as { lsn: string }[] | undefined)?.[0]?.lsn)
      : 0;
    return { ok: true, results: results.slice(start, start + statements.length), lsn };
  }
}
