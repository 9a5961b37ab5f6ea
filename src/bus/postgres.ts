import type { Sql } from '../store/db.ts';
import { FailureLog } from '../store/failure-log.ts';
import { ROUND_DEADLINE_MS, withDeadline } from '../store/tick.ts';
import { parseLsn } from '../store/lsn.ts';
import type { BusEvent, BusHealth, BusTransport, Literal, TransportSink, TxQuery } from './contract.ts';
import { frames, type Message } from './notify-wire.ts';

/**
 * The default transport: PostgreSQL LISTEN/NOTIFY on the deployment's own database. A NOTIFY
 * sent inside a transaction is delivered only if it commits, after the commit, and every
 * listener hears the notifications of all transactions in commit order.
 *
 * Record writes do not NOTIFY in their own transaction: a notifying transaction holds a
 * database-wide lock through its commit's WAL flush, so such writes committed one fsync at a
 * time (docs/decisions.md, "Writes, session 4"). Their events are rows of `bus_notify_outbox`
 * written in the write's transaction (`statements`), and a relay (`svc_bus_relay`, one process
 * at a time) sends committed rows as NOTIFYs in id order and deletes them. A write touching a
 * record takes the record's lock before its outbox row gets an id, so the events of one record
 * go out in commit order; events of unrelated writes may go out in id order rather than commit
 * order. A process relays after each of its commits; rows a dead process left are sent by the
 * next relay of any process (at the latest at the watchdog's round).
 */

/** The LISTEN/NOTIFY channel of the bus. */
export const BUS_CHANNEL = 'svc_bus';
const CHANNEL = BUS_CHANNEL;
/** Outbox rows sent per relay transaction. */
const RELAY_BATCH = 1_000;
/**
 * The relay vacuums the outbox at most this often, when it sent something since. Its rows are
 * deleted as they go out, and the relay's `order by id` walks the index from its left end, over
 * every entry deleted since the last vacuum: without one (autovacuum off, or a minute between its
 * visits) the cost of a relay grew with the rows sent before it — in a 10 s write bench the
 * PostgreSQL CPU per create + publish pair went from ~500 µs to ~2,100 µs.
 */
const VACUUM_EVERY_MS = 1_000;
/** Stored payloads (events too large for a NOTIFY) are kept this long for late readers. */
const PAYLOAD_KEEP_MS = 10 * 60_000;

export interface ListenOptions {
  watchdogMs?: number;
  query?: (text: string, params: unknown[]) => Promise<unknown>;
  /** A pool used for nothing but this LISTEN (store/db.ts connectListener); default `sql`. */
  listen?: Sql;
}

/** A commit waiting for its events to be sent: any relay round numbered above `after` covers it. */
interface Waiter {
  after: number;
  resolve: () => void;
}

export class PostgresTransport implements BusTransport {
  readonly kind = 'postgres' as const;
  readonly #sql: Sql;
  /** The pool whose `listen` this transport uses (one channel per pool: store/db.ts connectListener). */
  readonly #listenSql: Sql;
  readonly #notify: (channel: string, payload: string) => Promise<unknown>;
  readonly #every: number;
  #sink: TransportSink | undefined;
  #origin = '';
  #unlisten: (() => Promise<void>) | undefined;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  #lastHeard = Date.now();
  #lastSweep = Date.now();
  #lagMs = 0;
  /** Inbound messages waiting for a stored payload keep later ones behind them (order). */
  #inbound: Promise<void> | undefined;
  readonly #relayQuery: (text: string, params: unknown[]) => Promise<unknown>;
  #draining: Promise<void> | undefined;
  #again = false;
  #soon: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #sentSinceVacuum = 0;
  /** Relay rounds started; commits waiting for a round that started after them. */
  #rounds = 0;
  #waiters: Waiter[] = [];
  #lastVacuum = 0;
  /** While the server is away the relay fails on every commit and watchdog round: one line a minute. */
  readonly #relayLog = new FailureLog('bus: outbox relay failed');

  /**
   * LISTEN runs on postgres.js; NOTIFY may go through another pool (`notify`): every record
   * write sends one, and Bun's native client sends them at a fraction of postgres.js' CPU cost
   * (docs/decisions.md).
   *
   * A watchdog pings the channel every `watchdogMs`: postgres.js re-runs LISTEN once after its
   * connection drops and gives up silently if the server is still away, so a listener that has
   * heard nothing (not even its own pings) for a few rounds is re-created, and caches start over.
   */
  constructor(sql: Sql, notify?: (channel: string, payload: string) => Promise<unknown>, opts: ListenOptions = {}) {
    this.#sql = sql;
    this.#listenSql = opts.listen ?? sql;
    this.#notify = notify ?? ((channel, payload) => sql`select pg_notify(${channel}, ${payload})`);
    this.#relayQuery = opts.query ?? ((text, params) => sql.unsafe(text, params as never[]));
    this.#every = opts.watchdogMs ?? 5_000;
  }

  async start(origin: string, sink: TransportSink): Promise<void> {
    this.#origin = origin;
    this.#sink = sink;
    await this.#listen();
    this.#lastHeard = Date.now();
    this.#watchdog = setInterval(() => void this.#checkListener(), this.#every);
    this.#watchdog.unref?.();
  }

  get lagMs(): number {
    return this.#lagMs;
  }

  async health(): Promise<BusHealth> {
    const connected = Date.now() - this.#lastHeard <= this.#every * 3;
    return { kind: 'postgres', connected, lagMs: this.#lagMs, backlog: 0 };
  }

  async #listen(): Promise<void> {
    let listened = false;
    const sub = await this.#listenSql.listen(
      CHANNEL,
      (payload) => {
        this.#lastHeard = Date.now();
        let msg: Message;
        try {
          msg = JSON.parse(payload);
        } catch {
          return;
        }
        // Our own pings measure the NOTIFY → LISTEN delay, with no clock skew in between.
        const at = (msg as { at?: unknown }).at;
        if (msg.origin === this.#origin && typeof at === 'number') this.#lagMs = Math.max(0, Date.now() - at);
        if (Array.isArray(msg.events) || Array.isArray(msg.refs)) this.#heard(msg);
      },
      () => {
        // postgres.js calls this after the first LISTEN and after every reconnect of the listener
        // connection; notifications sent while it was down are lost, so caches must start over.
        if (listened) this.#sink?.reconnected();
        listened = true;
      },
    );
    this.#unlisten = () => sub.unlisten();
  }

  /**
   * A message as PostgreSQL delivered it: notifications of different transactions arrive in
   * commit order. Ones that point at stored payloads are read first, and messages behind them
   * wait their turn.
   */
  #heard(msg: Message): void {
    const lsn = parseLsn(msg.lsn) || undefined;
    const deliver = (events: BusEvent[]) => this.#sink?.heard(msg.origin, events, undefined, lsn);
    if (!msg.refs && !this.#inbound) {
      deliver(msg.events!);
      return;
    }
    const prev = this.#inbound ?? Promise.resolve();
    const next: Promise<void> = prev
      .then(async () => deliver(msg.refs ? await this.#load(msg.refs) : msg.events!))
      .catch((err) => console.error('bus: stored events could not be read:', err instanceof Error ? err.message : err))
      .finally(() => {
        if (this.#inbound === next) this.#inbound = undefined;
      });
    this.#inbound = next;
  }

  async #load(refs: string[]): Promise<BusEvent[]> {
    const rows = await this.#sql<
      { payload: string }[]
    >`select payload from bus_payloads where id = any(${refs}::bigint[]) order by id`;
    return rows.map((r) => JSON.parse(r.payload) as BusEvent);
  }

  async #checkListener(): Promise<void> {
    if (Date.now() - this.#lastHeard > this.#every * 3) {
      try {
        await this.#unlisten?.().catch(() => {});
        await this.#listen();
        this.#lastHeard = Date.now();
        this.#sink?.reconnected();
      } catch {
        return; // the server is still away; the next round tries again
      }
    }
    await this.#notify(CHANNEL, JSON.stringify({ origin: this.#origin, ping: true, at: Date.now() })).catch(() => {});
    // Outbox rows a process left behind (it died between its commit and its relay).
    void this.#drain();
    if (Date.now() - this.#lastSweep > PAYLOAD_KEEP_MS / 2) {
      this.#lastSweep = Date.now();
      await this
        .#sql`delete from bus_payloads where created_at < now() - ${PAYLOAD_KEEP_MS / 1000} * interval '1 second'`.catch(
        () => {},
      );
    }
  }

  /**
   * Sent in as few NOTIFYs as fit the 8,000-byte limit (a larger event goes through bus_payloads),
   * through the outbox like record writes' events: an event published after a write was answered
   * gets a later outbox id, so every process hears it after the write's (writes are answered
   * without waiting for their relay). Settles once the relay sent it.
   */
  async send(events: readonly BusEvent[]): Promise<void> {
    for (const f of frames(this.#origin, events)) {
      if ('payload' in f) await this.#relayQuery('insert into bus_notify_outbox (payload) values ($1)', [f.payload]);
      else {
        await this.#relayQuery(
          `with s as (insert into bus_payloads (payload) values ($1) returning id)
          insert into bus_notify_outbox (payload) select $2 || '"refs":["' || s.id || '"]}' from s`,
          [f.stored, f.head],
        );
      }
    }
    await this.committed();
  }

  async stage(query: TxQuery, events: readonly BusEvent[]): Promise<void> {
    const origin = this.#origin;
    await this.#sendFrames(
      origin,
      events,
      (payload) => query('select pg_notify($1, $2)', [CHANNEL, payload]),
      async (text) => {
        const [row] = (await query('insert into bus_payloads (payload) values ($1) returning id::text as id', [
          text,
        ])) as { id: string }[];
        return row!.id;
      },
    );
  }

  /**
   * Outbox rows of the notifications (one statement for all that fit), and stored payloads, as
   * SQL text; the relay sends them once the transaction committed (`committed`).
   */
  statements(events: readonly BusEvent[], literal: Literal): string[] {
    const origin = this.#origin;
    const out: string[] = [];
    let payloads: string[] = [];
    const flush = () => {
      if (payloads.length)
        out.push(
          `insert into bus_notify_outbox (payload) select p from unnest(${literal(payloads)}::text[]) with ordinality as u(p, i) order by i`,
        );
      payloads = [];
    };
    for (const f of frames(origin, events)) {
      if ('payload' in f) {
        payloads.push(f.payload);
        continue;
      }
      // Too large for a NOTIFY: stored, and the notification carries the row id (`#heard`).
      flush();
      out.push(`with s as (insert into bus_payloads (payload) values (${literal(f.stored)}) returning id)
      insert into bus_notify_outbox (payload) select ${literal(f.head)} || '"refs":["' || s.id || '"]}' from s`);
    }
    flush();
    return out;
  }

  /** Settles once a relay round that started after this call has sent what was committed (never rejects). */
  committed(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiters.push({ after: this.#rounds, resolve });
      void this.#drain();
    });
  }

  /** Waiters registered before round `round` started are covered by it. */
  #release(round: number): void {
    if (this.#waiters.length === 0) return;
    const left: Waiter[] = [];
    for (const w of this.#waiters) {
      if (w.after < round) w.resolve();
      else left.push(w);
    }
    this.#waiters = left;
  }

  /** Relays committed outbox rows until none are left (or another process holds the relay). */
  #drain(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    // A commit announced while a relay runs is covered by one more round (set before the check,
    // so no announcement falls between a round's look and the end of the relay).
    this.#again = true;
    // A relay that hangs (store/tick.ts) fails like one the server refused: its waiters go.
    this.#draining ??= withDeadline(this.#relay(), ROUND_DEADLINE_MS, 'the relay')
      .catch((err) => this.#relayFailed(err))
      .finally(() => {
        this.#draining = undefined;
        if (this.#again && !this.#stopped) void this.#drain();
      });
    return this.#draining;
  }

  async #relay(): Promise<void> {
    try {
      while (this.#again && !this.#stopped) {
        this.#again = false;
        const round = ++this.#rounds;
        const rows = (await this.#relayQuery('select svc_bus_relay($1, $2) as n', [CHANNEL, RELAY_BATCH])) as {
          n: number;
        }[];
        const n = Number(rows[0]?.n ?? 0);
        if (n >= 0 && n < RELAY_BATCH) this.#release(round);
        if (n < 0) {
          // Another process is relaying; its look may have come before our commit: look again soon.
          this.#again = false;
          this.#retrySoon();
          return;
        }
        if (n === RELAY_BATCH) this.#again = true;
        this.#sentSinceVacuum += n;
      }
      if (this.#sentSinceVacuum > 0 && Date.now() - this.#lastVacuum >= VACUUM_EVERY_MS) {
        this.#lastVacuum = Date.now();
        this.#sentSinceVacuum = 0;
        // skip_locked: another process vacuuming it already is as good.
        await this.#relayQuery('vacuum (skip_locked) bus_notify_outbox', []);
      }
      this.#relayLog.ok();
    } catch (err) {
      this.#relayFailed(err);
    }
  }

  #relayFailed(err: unknown): void {
    // The server is away: the rows stay, and the next commit or watchdog round sends them.
    // The writes committed all the same: their callers wait no longer.
    this.#again = false;
    this.#release(Infinity);
    if (!this.#stopped) this.#relayLog.fail(err);
  }

  #retrySoon(): void {
    if (this.#soon || this.#stopped) return;
    this.#soon = setTimeout(() => {
      this.#soon = undefined;
      void this.#drain();
    }, 5);
    this.#soon.unref?.();
  }

  async #sendFrames(
    origin: string,
    events: readonly BusEvent[],
    notify: (payload: string) => Promise<unknown>,
    store: (text: string) => Promise<string>,
  ): Promise<void> {
    // Sequential: order holds, and what was gathered before a stored event goes first.
    for (const f of frames(origin, events)) {
      if ('payload' in f) await notify(f.payload);
      else await notify(`${f.head}"refs":[${JSON.stringify(await store(f.stored))}]}`);
    }
  }

  async stop(): Promise<void> {
    // What this process committed goes out before it stops listening.
    await this.#drain();
    this.#stopped = true;
    this.#release(Infinity);
    if (this.#soon) clearTimeout(this.#soon);
    if (this.#watchdog) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    await this.#unlisten?.();
    await this.#inbound;
    this.#unlisten = undefined;
  }
}
