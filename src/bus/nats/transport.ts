import {
  connect,
  DeliverPolicy,
  DiscardPolicy,
  Events,
  nanos,
  RetentionPolicy,
  StorageType,
  type ConsumerMessages,
  type JetStreamClient,
  type NatsConnection,
} from 'nats';
import type { Sql } from '../../store/db.ts';
import type {
  BusEvent,
  BusHealth,
  BusTransport,
  EventMark,
  Literal,
  RoomWire,
  TransportSink,
  TxQuery,
} from '../contract.ts';
import { NarrowListener } from './narrow.ts';
import { NatsRooms } from './rooms.ts';
import { readBack } from './readback.ts';
import { decodeWire, outboxIdOf, parseBusUrl, projectToken, relativeSubject, stampLsn, type Wire } from './wire.ts';
import { parseLsn } from '../../store/lsn.ts';

export { parseBusUrl, subjectOf } from './wire.ts';

/**
 * The scale-out transport (`SVC_BUS_URL=nats://…`): events go to a NATS JetStream stream
 * through a transactional outbox. A write's events are rows of `bus_outbox` in the write's own
 * transaction (so a rolled-back write announces nothing), a relay publishes committed rows to
 * the stream and deletes them (so a process dying between commit and publish loses nothing —
 * another process's relay sends them), and every process reads the stream with an ordered
 * consumer (so a process that stays up hears every event once, in stream order, across a NATS
 * outage). While NATS is away writes still commit and events wait in the outbox.
 *
 * Subjects: `svc.<project>.changes.<model>` for record changes, `svc.<project>.events.<type>`
 * for a project's other events, `svc._.<type>` for deployment-wide ones (keys, signing keys).
 * Publishing uses the outbox row id as the message id, so a relay that published and then died
 * before deleting the rows is deduplicated by JetStream (within the duplicate window).
 */

/** Rows relayed per round (one PostgreSQL transaction, pipelined publishes). */
const BATCH = 500;
/** The relay's backstop: rows left by a process that died, or whose wake-up lost the lock race. */
const POLL_MS = 500;
/** pg_try_advisory_xact_lock key of the relay: one relay at a time keeps the outbox's order. */
const RELAY_LOCK = 0x5_76_63_62; // "svcb"

export interface NatsTransportOptions {
  /** Stream name (one per deployment on a shared NATS); from the URL by default. */
  stream?: string;
  /** Subject prefix; from the URL by default (`svc`). */
  prefix?: string;
  /** How long the stream keeps events (replay and catch-up window). */
  maxAgeMs?: number;
  /**
   * Hear only watched projects' events and deployment-wide ones (a gateway: nats/narrow.ts);
   * otherwise every event of the deployment (API and worker processes keep caches of any project).
   */
  narrow?: boolean;
}

/** Replay reads from this long before the client's last event (clocks of several processes). */
const REPLAY_MARGIN_MS = 2_000;
/** At most this many messages of a project are scanned for one replay. */
const REPLAY_SCAN = 20_000;

export class NatsTransport implements BusTransport {
  readonly kind = 'nats' as const;
  readonly #url: string;
  readonly #sql: Sql;
  readonly #stream: string;
  readonly #prefix: string;
  readonly #maxAgeMs: number;
  readonly #narrow: boolean;
  readonly #watched = new Set<string>();
  #listener: NarrowListener | undefined;
  /** When the connection dropped (narrow: the read-back starts there). */
  #droppedAt = 0;
  #origin = '';
  #sink: TransportSink | undefined;
  #nc: NatsConnection | undefined;
  #js: JetStreamClient | undefined;
  #messages: ConsumerMessages | undefined;
  #connected = false;
  #stopped = false;
  #lagMs = 0;
  #lastError = '';
  #dedupPrefix = '';
  #draining = false;
  #again = false;
  #poll: ReturnType<typeof setInterval> | undefined;
  #soon: ReturnType<typeof setTimeout> | undefined;
  #ready: Promise<void> | undefined;
  /** Room subjects this process hears (collaboration), kept across the first connect. */
  readonly #rooms: NatsRooms;

  constructor(url: string, sql: Sql, opts: NatsTransportOptions = {}) {
    const parsed = parseBusUrl(url);
    this.#url = parsed.servers;
    this.#sql = sql;
    this.#prefix = opts.prefix ?? parsed.prefix;
    this.#stream = opts.stream ?? parsed.stream;
    this.#maxAgeMs = opts.maxAgeMs ?? 10 * 60_000;
    this.#narrow = opts.narrow ?? false;
    this.#rooms = new NatsRooms(this.#prefix, () => this.#connected);
  }

  get roomWire(): RoomWire {
    return this.#rooms;
  }

  async start(origin: string, sink: TransportSink): Promise<void> {
    this.#origin = origin;
    this.#sink = sink;
    // Message ids must be unique per database, not just per outbox: two deployments may share
    // a NATS server (with their own stream names) and tests create many databases.
    const [id] = await this.#sql<
      { id: string }[]
    >`select (select system_identifier::text from pg_control_system()) || '.' || current_database() as id`;
    this.#dedupPrefix = id!.id;
    // A NATS that is down at start must not stop the process: writes queue in the outbox.
    this.#ready = this.#connect().catch((err) => {
      this.#lastError = err instanceof Error ? err.message : String(err);
    });
    await Promise.race([this.#ready, Bun.sleep(5_000)]);
    this.#poll = setInterval(() => void this.#drain(), POLL_MS);
    this.#poll.unref?.();
  }

  async #connect(): Promise<void> {
    const nc = await connect({
      servers: this.#url,
      name: `svc ${this.#origin}`,
      reconnect: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      waitOnFirstConnect: true,
    });
    if (this.#stopped) return void (await nc.close());
    this.#nc = nc;
    this.#connected = true;
    this.#rooms.attach(nc);
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === Events.Disconnect) {
          this.#connected = false;
          this.#droppedAt = Date.now();
          this.#sink?.linked?.(false);
        } else if (s.type === Events.Reconnect) {
          this.#connected = true;
          this.#listener?.gap(this.#droppedAt || Date.now());
          void this.#drain();
          this.#sink?.linked?.(true);
        }
      }
    })();
    const jsm = await nc.jetstreamManager();
    const config = {
      name: this.#stream,
      subjects: [`${this.#prefix}.>`],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_age: nanos(this.#maxAgeMs),
      duplicate_window: nanos(Math.min(120_000, this.#maxAgeMs)),
    };
    await jsm.streams.add(config).catch(async () => jsm.streams.update(this.#stream, config));
    this.#js = nc.jetstream();
    if (this.#narrow) {
      const listener = new NarrowListener(nc, this.#js, this.#stream, this.#prefix, (wire, msgId) =>
        this.#heard(wire, msgId),
      );
      await listener.start();
      for (const p of this.#watched) await listener.watch(p);
      this.#listener = listener;
      // Projects watched while NATS was away were not heard: read back from when they started.
      if (this.#watched.size && this.#droppedAt) listener.gap(this.#droppedAt);
    } else {
      const consumer = await this.#js.consumers.get(this.#stream, {
        filterSubjects: `${this.#prefix}.>`,
        deliver_policy: DeliverPolicy.New,
      });
      this.#messages = await consumer.consume({ max_messages: 1_000 });
      void this.#read(this.#messages);
    }
    void this.#drain();
  }

  async watch(projectId: string): Promise<void> {
    if (!this.#narrow) return;
    if (!this.#listener && this.#watched.size === 0) this.#droppedAt ||= Date.now();
    this.#watched.add(projectId);
    await this.#listener?.watch(projectId);
  }

  unwatch(projectId: string): void {
    if (!this.#narrow) return;
    this.#watched.delete(projectId);
    this.#listener?.unwatch(projectId);
  }

  #heard(wire: Wire, msgId: string | undefined): void {
    if (wire.o === this.#origin) this.#lagMs = Math.max(0, Date.now() - wire.at);
    this.#sink?.heard(wire.o, [wire.e], this.#markOf(msgId, wire.at), parseLsn(wire.l) || undefined);
  }

  /**
   * An event's mark: its outbox id alone (the message id also names the database, which clients
   * of SSE ids need not see); only messages of this deployment's database get one.
   */
  #markOf(msgId: string | undefined, at: number): EventMark | undefined {
    const id = msgId?.startsWith(`${this.#dedupPrefix}.`) ? outboxIdOf(msgId) : undefined;
    return id === undefined ? undefined : { id: String(id), at };
  }

  async #read(messages: ConsumerMessages): Promise<void> {
    for await (const m of messages) {
      const wire = decodeWire(m.data);
      if (wire) this.#heard(wire, m.headers?.get('Nats-Msg-Id'));
    }
  }

  /**
   * Reads the project's subjects back from the stream, from a little before `since` (clock
   * margin), skipping up to the message `after`. The scan is bounded (REPLAY_SCAN messages):
   * a client gone for long gets null, not a walk through the whole stream.
   */
  async replay(
    projectId: string,
    since: number,
    after: string,
    max: number,
  ): Promise<{ event: BusEvent; mark: EventMark; lsn?: number }[] | null> {
    const js = this.#js;
    if (!js || !this.#connected || Date.now() - since > this.#maxAgeMs) return null;
    const out: { event: BusEvent; mark: EventMark; lsn?: number }[] = [];
    let found = false;
    const complete = await readBack(
      js,
      this.#stream,
      `${this.#prefix}.${projectToken(projectId)}.>`,
      since - REPLAY_MARGIN_MS,
      (m) => {
        const wire = decodeWire(m.data);
        const mark = wire && this.#markOf(m.headers?.get('Nats-Msg-Id'), wire.at);
        if (!found) {
          found = mark?.id === after;
          return;
        }
        if (wire && mark) out.push({ event: wire.e, mark, lsn: parseLsn(wire.l) || undefined });
        return out.length <= max;
      },
      REPLAY_SCAN,
    );
    return complete && found ? out : null;
  }

  get lagMs(): number {
    return this.#lagMs;
  }

  async health(): Promise<BusHealth> {
    const [row] = await this.#sql<{ n: number }[]>`select count(*)::int as n from bus_outbox`.catch(() => [{ n: -1 }]);
    const connected = this.#connected && (this.#messages !== undefined || this.#listener !== undefined);
    return {
      kind: 'nats',
      connected,
      lagMs: this.#lagMs,
      backlog: row!.n,
      ...(connected || !this.#lastError ? {} : { detail: this.#lastError }),
    };
  }

  #rows(events: readonly BusEvent[]): { s: string; p: string }[] {
    const at = Date.now();
    return events.map((e) => ({ s: relativeSubject(e), p: JSON.stringify({ o: this.#origin, at, e } satisfies Wire) }));
  }

  async send(events: readonly BusEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this
      .#sql`insert into bus_outbox (subject, payload) select s, p from jsonb_to_recordset(${JSON.stringify(this.#rows(events))}::text::jsonb) as x(s text, p text)`;
    void this.#drain();
  }

  async stage(query: TxQuery, events: readonly BusEvent[]): Promise<void> {
    await query(
      'insert into bus_outbox (subject, payload) select s, p from jsonb_to_recordset($1::text::jsonb) as x(s text, p text)',
      [JSON.stringify(this.#rows(events))],
    );
  }

  statements(events: readonly BusEvent[], literal: Literal): string[] {
    return [
      `insert into bus_outbox (subject, payload) select s, p from jsonb_to_recordset(${literal(JSON.stringify(this.#rows(events)))}::jsonb) as x(s text, p text)`,
    ];
  }

  committed(): void {
    void this.#drain();
  }

  /** Relays committed outbox rows until none are left (or another process holds the relay). */
  async #drain(): Promise<void> {
    if (this.#stopped || !this.#js || !this.#connected) return;
    if (this.#draining) {
      this.#again = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#again = false;
        const n = await this.#relay();
        if (n === BATCH) this.#again = true;
      } while (this.#again && !this.#stopped);
    } catch (err) {
      this.#lastError = err instanceof Error ? err.message : String(err);
    } finally {
      this.#draining = false;
    }
  }

  async #relay(): Promise<number> {
    const js = this.#js!;
    return this.#sql.begin(async (tx) => {
      const [lock] = await tx<{ ok: boolean }[]>`select pg_try_advisory_xact_lock(${RELAY_LOCK}) as ok`;
      if (!lock!.ok) {
        // Another process is relaying; it may have looked before our commit: look again soon.
        this.#retrySoon();
        return 0;
      }
      // Ordered by the bigint, not by its text ("10" < "7"). The flushed WAL position, read after
      // the statement's snapshot: at or past the commits of the rows it sees (synchronous_commit
      // on), what a replica must have replayed to show their changes (the wire's `l`).
      const rows = await tx<
        { id: string; subject: string; payload: string; lsn: string }[]
      >`select id::text as id, subject, payload, pg_current_wal_flush_lsn()::text as lsn from bus_outbox order by bus_outbox.id limit ${BATCH}`;
      if (rows.length === 0) return 0;
      const enc = new TextEncoder();
      // Sent in order on one connection (the stream stores them in that order); acks awaited together.
      await Promise.all(
        rows.map((r) =>
          js.publish(`${this.#prefix}.${r.subject}`, enc.encode(stampLsn(r.payload, r.lsn)), {
            msgID: `${this.#dedupPrefix}.${r.id}`,
            timeout: 5_000,
          }),
        ),
      );
      await tx`delete from bus_outbox where id = any(${rows.map((r) => r.id)}::bigint[])`;
      return rows.length;
    });
  }

  #retrySoon(): void {
    if (this.#soon) return;
    this.#soon = setTimeout(() => {
      this.#soon = undefined;
      void this.#drain();
    }, 25);
    this.#soon.unref?.();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#poll) clearInterval(this.#poll);
    if (this.#soon) clearTimeout(this.#soon);
    while (this.#draining) await Bun.sleep(10);
    this.#messages?.stop();
    this.#listener?.stop();
    // A NATS still away at stop: its pending first connect closes itself when it lands (#connect).
    if (this.#connected) await this.#nc?.drain().catch(() => {});
    else await this.#nc?.close().catch(() => {});
  }
}
