import { randomUUID } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import type { BusEvent, BusHealth, BusTransport, EventMark, Literal, RoomWire, TxQuery } from './contract.ts';
import { type ListenOptions, PostgresTransport } from './postgres.ts';

/**
 * The event bus. Events are delivered to local subscribers at once and, through a transport,
 * to every other process of the deployment, so several processes behave as one service
 * (CONTRACT §2). Two transports: PostgreSQL LISTEN/NOTIFY (the default, postgres.ts) and
 * NATS JetStream through a transactional outbox (`SVC_BUS_URL=nats://…`, nats/transport.ts). A process
 * ignores the echo of its own events for plain listeners; committed listeners hear every
 * process's events, its own included, once they are committed.
 */
export type {
  BusEvent,
  BusHealth,
  BusTransport,
  EventMark,
  Literal,
  RoomWire,
  TransportSink,
  TxQuery,
} from './contract.ts';

/**
 * `mark` is the event's place in a replayable bus (NATS), for committed listeners; `lsn` a
 * primary WAL position at or past the event's commit, when the transport named one (read
 * replicas: src/store/replicas.ts).
 */
type Listener = (event: BusEvent, mark?: EventMark, lsn?: number) => void;

export class EventBus {
  readonly origin = randomUUID();
  readonly #listeners = new Set<Listener>();
  readonly #committed = new Set<Listener>();
  readonly #reconnectListeners = new Set<() => void>();
  readonly #linkListeners = new Set<(up: boolean) => void>();
  /** Watchers per project, and the transport's subscription every later watcher also waits for. */
  readonly #watching = new Map<string, { n: number; ready: Promise<void> }>();
  #transport: BusTransport | undefined;

  /**
   * Bridges to PostgreSQL LISTEN/NOTIFY (see postgres.ts for `notify` and `watchdogMs`);
   * without a transport the bus is process-local.
   */
  async attach(
    sql: Sql,
    notify?: (channel: string, payload: string) => Promise<unknown>,
    opts: ListenOptions = {},
  ): Promise<void> {
    await this.attachTransport(new PostgresTransport(sql, notify, opts));
  }

  async attachTransport(transport: BusTransport): Promise<void> {
    await transport.start(this.origin, {
      heard: (origin, events, mark, lsn) => {
        if (origin !== this.origin) this.#deliver(this.#listeners, events, undefined, lsn);
        this.#deliver(this.#committed, events, events.length === 1 ? mark : undefined, lsn);
      },
      reconnected: () => this.#reconnected(),
      linked: (up) => {
        for (const l of this.#linkListeners) {
          try {
            l(up);
          } catch (err) {
            console.error('bus link listener failed:', err instanceof Error ? err.message : err);
          }
        }
      },
    });
    this.#transport = transport;
  }

  get transport(): BusTransport | undefined {
    return this.#transport;
  }

  /** The last measured send → hear delay of the transport, in ms (metrics). */
  get lagMs(): number {
    return this.#transport?.lagMs ?? 0;
  }

  async health(): Promise<BusHealth> {
    return this.#transport ? this.#transport.health() : { kind: 'local', connected: true, lagMs: 0, backlog: 0 };
  }

  /**
   * Declares that this process needs `projectId`'s events (a live project actor, channel or
   * room); call the returned function once when it no longer does. Await it before reading the
   * state those events change, so nothing committed after the read is missed.
   */
  async watch(projectId: string): Promise<() => void> {
    let w = this.#watching.get(projectId);
    if (w) w.n++;
    else
      this.#watching.set(
        projectId,
        (w = { n: 1, ready: Promise.resolve(this.#transport?.watch?.(projectId)).catch(() => {}) }),
      );
    // A second watcher arriving while the first subscription is still on its way waits for it too.
    // A subscription that could not be confirmed (NATS away) stays registered with the client and
    // is made again on reconnect, where the gap read-back covers the outage: not an error here.
    await w.ready;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const cur = this.#watching.get(projectId);
      if (cur && --cur.n > 0) return;
      this.#watching.delete(projectId);
      this.#transport?.unwatch?.(projectId);
    };
  }

  /** Hears the transport's link to the bus going down (false) and coming back (true). */
  onLink(listener: (up: boolean) => void): () => void {
    this.#linkListeners.add(listener);
    return () => this.#linkListeners.delete(listener);
  }

  /** Called whenever the transport comes back after a drop in which events may have been missed. */
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

  /** Hears this process's events at once and other processes' after they cross (caches). */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Hears every event, this process's included, as the transport delivers it: only after its
   * transaction committed, and for events staged with `stage`, in commit order across all
   * processes (the realtime pipeline). Without a transport, at once.
   */
  subscribeCommitted(listener: Listener): () => void {
    this.#committed.add(listener);
    return () => this.#committed.delete(listener);
  }

  /** Delivers locally now and to other processes through the transport. */
  publish(event: BusEvent): Promise<void> {
    return this.publishAll([event]);
  }

  /** Several events in order: delivered locally one by one, then sent. */
  async publishAll(events: readonly BusEvent[]): Promise<void> {
    this.#deliver(this.#listeners, events);
    if (!this.#transport) return this.#deliver(this.#committed, events);
    await this.#transport.send(events);
  }

  /**
   * Announces events from inside the caller's transaction: they go out only if it commits,
   * after the commit. Call `deliverLocal` with the same events after the commit.
   */
  async stage(query: TxQuery, events: readonly BusEvent[]): Promise<void> {
    if (events.length === 0 || !this.#transport) return;
    await this.#transport.stage(query, events);
  }

  /** What `stage` would run, as SQL statements for a transaction sent as one message. */
  statements(events: readonly BusEvent[], literal: Literal): string[] {
    if (events.length === 0 || !this.#transport) return [];
    return this.#transport.statements(events, literal);
  }

  /** A project's events after the marked one, from a transport that keeps a log (NATS); else null. */
  replay(
    projectId: string,
    since: number,
    after: string,
    max: number,
  ): Promise<{ event: BusEvent; mark: EventMark; lsn?: number }[] | null> {
    return this.#transport?.replay?.(projectId, since, after, max) ?? Promise.resolve(null);
  }

  /** The transport's per-room subjects (NATS), when it has them. */
  get roomWire(): RoomWire | undefined {
    return this.#transport?.roomWire;
  }

  /** Whether events reach other processes. */
  get bridged(): boolean {
    return this.#transport !== undefined;
  }

  /**
   * After a commit whose events were staged: this process's plain listeners hear them now. With
   * an outbox transport the promise settles once the events are sent (a write is acknowledged
   * only then, so whatever its client does next is heard after them); it never rejects.
   */
  deliverLocal(events: readonly BusEvent[]): void | Promise<void> {
    this.#deliver(this.#listeners, events);
    if (!this.#transport) this.#deliver(this.#committed, events);
    else if (events.length) return this.#transport.committed();
  }

  async detach(): Promise<void> {
    const t = this.#transport;
    this.#transport = undefined;
    await t?.stop();
  }

  #deliver(to: Set<Listener>, events: readonly BusEvent[], mark?: EventMark, lsn?: number): void {
    for (const event of events) {
      for (const l of to) {
        try {
          l(event, mark, lsn);
        } catch (err) {
          console.error('bus listener failed:', err instanceof Error ? err.message : err);
        }
      }
    }
  }
}

/**
 * Wraps an actor factory so that each actor watches its project's events from before it loads
 * until it has stopped (see `EventBus.watch`). `projectOf` maps the actor's key to its project.
 */
export function watching<A extends { stop(): Promise<void> }>(
  bus: EventBus,
  projectOf: (key: string) => string,
  spawn: (key: string) => Promise<A> | A,
): (key: string) => Promise<A> {
  return async (key) => {
    const release = await bus.watch(projectOf(key));
    let actor: A;
    try {
      actor = await spawn(key);
    } catch (err) {
      release();
      throw err;
    }
    const stop = actor.stop.bind(actor);
    return Object.assign(actor, {
      async stop() {
        try {
          await stop();
        } finally {
          release();
        }
      },
    });
  };
}
