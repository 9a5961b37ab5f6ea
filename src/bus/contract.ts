/**
 * What the event bus carries and what a transport must do (bus.ts is the bus; postgres.ts
 * and nats/transport.ts are the transports). Kept apart so that transports need not import the bus.
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
  /** A release went live (src/releases/publish.ts); realtime delivers it on `changes:*`. */
  | {
      type: 'release.published';
      projectId: string;
      releaseId: string;
      name: string;
      records: number;
      userId: string | null;
    }
  | { type: 'custom'; topic: string; projectId: string; data: Record<string, unknown> };

/** Runs one statement in the caller's transaction (Bun's SQL or postgres.js, via content/db.ts `run`). */
export type TxQuery = (text: string, params: unknown[]) => Promise<unknown[]>;
/** Renders a value as an SQL literal (content/tx.ts `literal`), for one-message transactions. */
export type Literal = (value: unknown) => string;

/** Where an event sits in a replayable bus (NATS): its message id and when it was written (ms). */
export interface EventMark {
  id: string;
  at: number;
}

/**
 * Plain publish/subscribe per collaboration room beside the event stream (NATS): not stored,
 * lost while the link is down (the rooms re-sync when it is back, src/collab/relay-nats.ts).
 */
export interface RoomWire {
  publish(room: string, data: Uint8Array): void;
  subscribe(room: string, onMessage: (data: Uint8Array) => void): () => void;
}

/** What a transport hands back: events as committed, in commit order, from every process. */
export interface TransportSink {
  /**
   * `mark` comes with a single event from a transport that can replay (replay below). `lsn`: a
   * primary WAL position at or past the events' commits, when the transport knows one (both
   * relays stamp it: read replicas, src/store/replicas.ts).
   */
  heard(origin: string, events: readonly BusEvent[], mark?: EventMark, lsn?: number): void;
  /** Events may have been missed (a lost listener): caches must start over. */
  reconnected(): void;
  /**
   * The link to the bus went down (false) or came back (true). Events committed meanwhile wait
   * (the NATS outbox) and arrive after `true`; realtime clients are told either way.
   */
  linked?(up: boolean): void;
}

export interface BusHealth {
  kind: 'postgres' | 'nats' | 'local';
  connected: boolean;
  /** Last measured delay from sending to hearing an event, ms. */
  lagMs: number;
  /** Events committed but not yet handed to the bus (the NATS outbox); 0 for PostgreSQL. */
  backlog: number;
  detail?: string;
}

/**
 * How events cross processes. Every method that takes a transaction makes the events go out
 * only if that transaction commits, after it commits.
 */
export interface BusTransport {
  readonly kind: 'postgres' | 'nats';
  /** Starts hearing; `origin` names this process in what it sends (its echo is recognised). */
  start(origin: string, sink: TransportSink): Promise<void>;
  /** Outside any transaction. */
  send(events: readonly BusEvent[]): Promise<void>;
  /** Inside the caller's transaction. */
  stage(query: TxQuery, events: readonly BusEvent[]): Promise<void>;
  /** The same as statements, for a caller that sends its whole transaction as one message. */
  statements(events: readonly BusEvent[], literal: Literal): string[];
  /** A transaction with staged events committed (the outbox relay may go now). */
  committed(): void | Promise<void>;
  /**
   * Interest in one project's events (ref-counted by the bus). A transport that narrows (NATS
   * in a gateway) hears only watched projects' events and deployment-wide ones once the
   * returned promise settles; the others hear everything and ignore this.
   */
  watch?(projectId: string): Promise<void>;
  unwatch?(projectId: string): void;
  /**
   * A project's events after the one marked `after` (a message id, written at `since` ms), in bus
   * order, at most `max`; null when that message is no longer found or more than `max` follow
   * (the caller then resumes live only). Transports without a replayable log leave it out.
   */
  replay?(
    projectId: string,
    since: number,
    after: string,
    max: number,
  ): Promise<{ event: BusEvent; mark: EventMark; lsn?: number }[] | null>;
  /** Rooms' own subjects, on a transport that has them (NATS); PostgreSQL rooms use their table. */
  readonly roomWire?: RoomWire;
  /** The last measured send → hear delay, ms (metrics). */
  readonly lagMs: number;
  health(): Promise<BusHealth>;
  stop(): Promise<void>;
}
