import { randomUUID } from 'node:crypto';
import type { Sql } from '../store/db.ts';

/**
 * The event bus. Events are delivered to local subscribers at once and, through PostgreSQL
 * LISTEN/NOTIFY, to every other process on the same database, so several processes behave
 * as one service (CONTRACT §2). A process ignores the echo of its own notifications.
 */
export type BusEvent =
  | { type: 'schema.changed'; projectId: string; version: number }
  | { type: 'project.changed'; projectId: string }
  /** A fleet group published `version`: every member project (src/fleet) reloads. */
  | { type: 'fleet.published'; groupId: string; version: number }
  | {
      type: 'record.changed';
      projectId: string;
      action: 'created' | 'updated' | 'published' | 'unpublished' | 'deleted';
      recordId: string;
      modelKey: string;
      userId: string | null;
    }
  | { type: 'key.changed'; keyId: string; keyHash: string | null }
  /** A customer session was revoked (logout, refresh-token reuse): its access tokens die now. */
  | { type: 'customer.session.revoked'; projectId: string; customerId: string; sessionId: string }
  /** A customer's profile (attributes that segments read) changed: drop cached copies. */
  | { type: 'customer.changed'; projectId: string; customerId: string }
  /** The deployment's signing keys changed (rotation): reload the key set. */
  | { type: 'signing-keys.changed' }
  /** A notification for one customer; realtime delivers it as `notification.{kind}` on `notifications:{customerId}`. */
  | { type: 'notification.created'; projectId: string; customerId: string; kind: string; data: Record<string, unknown> }
  /** An operation execution moved (src/operations); `jobs:*` channels and `operationExecution`. */
  | {
      type: 'execution.changed';
      projectId: string;
      executionId: string;
      operationKey: string;
      status: 'pending' | 'dispatched' | 'running' | 'completed' | 'failed' | 'cancelled' | 'timed_out';
      progressPct: number | null;
      progressMessage: string | null;
      resultJson: unknown;
      errorJson: unknown;
    }
  | { type: 'custom'; topic: string; projectId: string; data: Record<string, unknown> };

type Listener = (event: BusEvent) => void;
/** Runs one statement in the caller's transaction (Bun's SQL or postgres.js, via content/db.ts `run`). */
export type TxQuery = (text: string, params: unknown[]) => Promise<unknown[]>;

/** The LISTEN/NOTIFY channel of the bus (record writes NOTIFY on it inside their transaction). */
export const BUS_CHANNEL = 'svc_bus';
const CHANNEL = BUS_CHANNEL;
/** NOTIFY payloads must stay under 8,000 bytes; leave room for the envelope. */
const PAYLOAD_BUDGET = 7_500;
/** Stored payloads (events too large for a NOTIFY) are kept this long for late readers. */
const PAYLOAD_KEEP_MS = 10 * 60_000;

interface Message {
  origin: string;
  events?: BusEvent[];
  /** Ids in `bus_payloads` of events too large for a NOTIFY (sql/011_bus_payloads.sql). */
  refs?: string[];
}

export class EventBus {
  readonly origin = randomUUID();
  readonly #listeners = new Set<Listener>();
  readonly #committed = new Set<Listener>();
  readonly #reconnectListeners = new Set<() => void>();
  #notify: ((channel: string, payload: string) => Promise<unknown>) | undefined;
  #sql: Sql | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  #lastHeard = Date.now();
  #lastSweep = Date.now();
  #lagMs = 0;
  /** Inbound messages waiting for a stored payload keep later ones behind them (order). */
  #inbound: Promise<void> | undefined;

  /**
   * Bridges to PostgreSQL; without it the bus is process-local. LISTEN runs on postgres.js;
   * NOTIFY may go through another pool (`notify`): every record write sends one, and Bun's
   * native client sends them at a fraction of postgres.js' CPU cost (docs/decisions.md).
   *
   * A watchdog pings the channel every `watchdogMs`: postgres.js re-runs LISTEN once after its
   * connection drops and gives up silently if the server is still away, so a listener that has
   * heard nothing (not even its own pings) for a few rounds is re-created, and caches start over.
   */
  async attach(sql: Sql, notify?: (channel: string, payload: string) => Promise<unknown>, opts: { watchdogMs?: number } = {}): Promise<void> {
    this.#sql = sql;
    this.#notify = notify ?? ((channel, payload) => sql`select pg_notify(${channel}, ${payload})`);
    await this.#listen(sql);
    const every = opts.watchdogMs ?? 5_000;
    this.#lastHeard = Date.now();
    this.#watchdog = setInterval(() => void this.#checkListener(sql, every), every);
    this.#watchdog.unref?.();
  }

  async #listen(sql: Sql): Promise<void> {
    let listened = false;
    const sub = await sql.listen(CHANNEL, (payload) => {
      this.#lastHeard = Date.now();
      let msg: Message;
      try {
        msg = JSON.parse(payload);
      } catch {
        return;
      }
      // Our own pings measure the NOTIFY → LISTEN delay, with no clock skew in between.
      const at = (msg as { at?: unknown }).at;
      if (msg.origin === this.origin && typeof at === 'number') this.#lagMs = Math.max(0, Date.now() - at);
      if (Array.isArray(msg.events) || Array.isArray(msg.refs)) this.#heard(msg);
    }, () => {
      // postgres.js calls this after the first LISTEN and after every reconnect of the listener
      // connection; notifications sent while it was down are lost, so caches must start over.
      if (listened) this.#reconnected();
      listened = true;
    });
    this.#unlisten = () => sub.unlisten();
  }

  /**
   * A message as PostgreSQL delivered it: notifications of different transactions arrive in
   * commit order, so committed listeners see them in that order. Ones that point at stored
   * payloads are read first, and messages behind them wait their turn.
   */
  #heard(msg: Message): void {
    const deliver = (events: BusEvent[]) => {
      if (msg.origin !== this.origin) this.#deliver(this.#listeners, events);
      this.#deliver(this.#committed, events);
    };
    if (!msg.refs && !this.#inbound) return deliver(msg.events!);
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
    const rows = await this.#sql!<{ payload: string }[]>`select payload from bus_payloads where id = any(${refs}::bigint[]) order by id`;
    return rows.map((r) => JSON.parse(r.payload) as BusEvent);
  }

  async #checkListener(sql: Sql, every: number): Promise<void> {
    if (!this.#notify) return;
    if (Date.now() - this.#lastHeard > every * 3) {
      try {
        await this.#unlisten?.().catch(() => {});
        await this.#listen(sql);
        this.#lastHeard = Date.now();
        this.#reconnected();
      } catch {
        return; // the server is still away; the next round tries again
      }
    }
    await this.#notify(CHANNEL, JSON.stringify({ origin: this.origin, ping: true, at: Date.now() })).catch(() => {});
    if (Date.now() - this.#lastSweep > PAYLOAD_KEEP_MS / 2) {
      this.#lastSweep = Date.now();
      await sql`delete from bus_payloads where created_at < now() - ${PAYLOAD_KEEP_MS / 1000} * interval '1 second'`.catch(() => {});
    }
  }

  /** The last NOTIFY → LISTEN delay the watchdog's ping measured, in ms (metrics). */
  get lagMs(): number {
    return this.#lagMs;
  }

  /** Called whenever the LISTEN connection comes back after a drop (events may have been missed). */
  onReconnect(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    return () => this.#reconnectListeners.delete(listener);
  }

  #reconnected(): void {
    for (const l of this.#reconnectListeners) {
      try {
        l();
      } catch (err) {
        console.error('bus reconnect listener failed:', err instanceof Error ? err.message : err);
      }
    }
  }

  /** Hears this process's events at once and other processes' after their NOTIFY (caches). */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Hears every event, this process's included, as PostgreSQL delivers it: only after its
   * transaction committed, and for events staged with `stage`, in commit order across all
   * processes (the realtime pipeline). Without a database, at once.
   */
  subscribeCommitted(listener: Listener): () => void {
    this.#committed.add(listener);
    return () => this.#committed.delete(listener);
  }

  /** Delivers locally now and to other processes after the NOTIFY. */
  publish(event: BusEvent): Promise<void> {
    return this.publishAll([event]);
  }

  /**
   * Several events in order: delivered locally one by one, and sent in as few NOTIFYs as fit
   * PostgreSQL's 8,000-byte payload limit (a larger event goes through `bus_payloads`).
   */
  async publishAll(events: readonly BusEvent[]): Promise<void> {
    this.#deliver(this.#listeners, events);
    if (!this.#notify) return this.#deliver(this.#committed, events);
    const sql = this.#sql!;
    await this.#send(events, (payload) => this.#notify!(CHANNEL, payload), async (text) => {
      const [row] = await sql<{ id: string }[]>`insert into bus_payloads (payload) values (${text}) returning id::text as id`;
      return row!.id;
    });
  }

  /**
   * Announces events from inside the caller's transaction: PostgreSQL delivers the NOTIFY only
   * if it commits, after the commit, and in commit order with every other transaction's. Call
   * `deliverLocal` with the same events after the commit for this process's caches.
   */
  async stage(query: TxQuery, events: readonly BusEvent[]): Promise<void> {
    if (events.length === 0) return;
    if (!this.#notify) return;
    await this.#send(events, (payload) => query('select pg_notify($1, $2)', [CHANNEL, payload]), async (text) => {
      const [row] = (await query('insert into bus_payloads (payload) values ($1) returning id::text as id', [text])) as { id: string }[];
      return row!.id;
    });
  }

  /** Whether events reach other processes (attached to PostgreSQL). */
  get bridged(): boolean {
    return this.#notify !== undefined;
  }

  /**
   * What `stage` would send, for a caller that writes its transaction as one message
   * (src/content/tx.ts): NOTIFY payloads in order; an event too large for one is `stored` — its
   * text goes into bus_payloads and the notification carries `${head}"refs":["<id>"]}`.
   */
  frames(events: readonly BusEvent[]): ({ payload: string } | { stored: string; head: string })[] {
    const head = `{"origin":${JSON.stringify(this.origin)},`;
    const out: ({ payload: string } | { stored: string; head: string })[] = [];
    let chunk: string[] = [];
    let size = 0;
    const flush = () => {
      if (chunk.length) out.push({ payload: `${head}"events":[${chunk.join(',')}]}` });
      chunk = [];
      size = 0;
    };
    for (const e of events) {
      const text = JSON.stringify(e);
      if (text.length > PAYLOAD_BUDGET) {
        flush();
        out.push({ stored: text, head });
        continue;
      }
      if (size + text.length > PAYLOAD_BUDGET) flush();
      chunk.push(text);
      size += text.length + 1;
    }
    flush();
    return out;
  }

  /** After a commit whose events were staged: this process's plain listeners hear them now. */
  deliverLocal(events: readonly BusEvent[]): void {
    this.#deliver(this.#listeners, events);
    if (!this.#notify) this.#deliver(this.#committed, events);
  }

  async #send(events: readonly BusEvent[], notify: (payload: string) => Promise<unknown>, store: (text: string) => Promise<string>): Promise<void> {
    const head = `{"origin":${JSON.stringify(this.origin)},`;
    let chunk: string[] = [];
    let size = 0;
    const send = async () => {
      if (chunk.length) await notify(`${head}"events":[${chunk.join(',')}]}`);
      chunk = [];
      size = 0;
    };
    for (const e of events) {
      const text = JSON.stringify(e);
      if (text.length > PAYLOAD_BUDGET) {
        // Too large for any NOTIFY: stored, and the notification carries its id only. What was
        // gathered before it goes first, so order holds.
        await send();
        await notify(`${head}"refs":[${JSON.stringify(await store(text))}]}`);
        continue;
      }
      if (size + text.length > PAYLOAD_BUDGET) await send();
      chunk.push(text);
      size += text.length + 1;
    }
    await send();
  }

  async detach(): Promise<void> {
    if (this.#watchdog) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    await this.#unlisten?.();
    await this.#inbound;
    this.#unlisten = undefined;
    this.#notify = undefined;
  }

  #deliver(to: Set<Listener>, events: readonly BusEvent[]): void {
    for (const event of events) {
      for (const l of to) {
        try {
          l(event);
        } catch (err) {
          console.error('bus listener failed:', err instanceof Error ? err.message : err);
        }
      }
    }
  }
}
