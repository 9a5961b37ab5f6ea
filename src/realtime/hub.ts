import { watching, type BusEvent, type EventBus } from '../bus/bus.ts';
import { ActorRegistry } from '../actors/registry.ts';
import { ChannelActor, parseStreamId, streamId, type TopicPublisher } from './channel.ts';
import { parseChannel, type Channel } from './protocol/channels.ts';
import type { EventFrame } from './protocol/frames.ts';
import { formatLsn } from '../store/lsn.ts';

/**
 * A process's realtime state: one ChannelActor per live channel (created on first subscriber,
 * unloaded once the last has been gone for `channelIdleMs`), fed from the bus's committed
 * stream, so every process delivers every process's events, after commit and in commit order.
 * Connected clients (SSE streams, `/_events` and `/graphql/ws` sockets) register here for the
 * per-identity caps, the revocation checks and the drain on shutdown.
 */
export interface HubOptions {
  /** How long a channel without subscribers keeps its replay buffer. */
  channelIdleMs?: number;
  /** Open connections (streams and sockets) per identity (key, or customer). */
  maxConnectionsPerIdentity?: number;
  /** Channels per `/_events` socket and subscriptions per `/graphql/ws` socket. */
  maxSubscriptionsPerConnection?: number;
  /** SSE heartbeat interval (spec "Limits": 30 s). */
  heartbeatMs?: number;
  /** Bytes an SSE stream may have queued before it is dropped as a slow consumer. */
  sseBufferBytes?: number;
  /**
   * Content events (`record.*`, `release.published`) name in `data.lsn` the primary WAL position
   * at or past their commit, when the bus gave one: set with read replicas, so a client that
   * refetches through any process can present it as `x-svc-lsn` (docs/scaling.md).
   */
  lsn?: boolean;
}

export interface Client {
  /** Who the per-identity cap counts: `key:<id>` or `customer:<id>`. */
  identity: string;
  keyId: string | null;
  customerId: string | null;
  /** The customer's login session, when a token came with the key. */
  sessionId: string | null;
  /** Re-checks the credentials; false closes the client with 4403. */
  recheck(): Promise<boolean>;
  close(code: number, reason: string): void;
  /** Tells the client the event bus went away (false) or is back (true): a frame, not silence. */
  linked?(up: boolean): void;
}

export class TooManyConnections extends Error {
  constructor(
    readonly limit: number,
    readonly held: number,
  ) {
    super(`At most ${limit} realtime connections per identity`);
  }
}

const keyOf = (projectId: string, channel: string) => `${projectId}|${channel}`;
/** Events of a project read back for one resuming stream, at most (a channel keeps 256). */
const REPLAY_MAX = 1_000;

/** The channels and event of a bus event; null for events realtime clients do not see. */
export function framesOf(
  e: BusEvent,
  lsn?: number,
): { projectId: string; channels: string[]; event: Omit<EventFrame, 'channel'> } | null {
  // Read replicas (HubOptions.lsn): the position a read must see for this change.
  const at = lsn ? { lsn: formatLsn(lsn) } : {};
  switch (e.type) {
    case 'record.changed':
      return {
        projectId: e.projectId,
        channels: [`changes:${e.modelKey}`, 'changes:*'],
        event: {
          event: `record.${e.action}`,
          data: { modelKey: e.modelKey, recordId: e.recordId, action: e.action, userId: e.userId, ...at },
        },
      };
    case 'release.published':
      // After the records' own events (they commit together, announced in order).
      return {
        projectId: e.projectId,
        channels: ['changes:*'],
        event: {
          event: 'release.published',
          data: { releaseId: e.releaseId, name: e.name, records: e.records, userId: e.userId, ...at },
        },
      };
    case 'execution.changed':
      return {
        projectId: e.projectId,
        channels: [`jobs:${e.executionId}`, 'jobs:*'],
        event: {
          event: `job.${e.status}`,
          data: {
            id: e.executionId,
            operationKey: e.operationKey ?? null,
            status: e.status,
            progressPct: e.progressPct,
            progressMessage: e.progressMessage,
            resultJson: e.resultJson ?? null,
            errorJson: e.errorJson ?? null,
          },
        },
      };
    case 'notification.created':
      return {
        projectId: e.projectId,
        channels: [`notifications:${e.customerId}`],
        event: { event: `notification.${e.kind}`, data: { ...e.data, customerId: e.customerId, kind: e.kind } },
      };
    default:
      return null;
  }
}

export class RealtimeHub {
  readonly options: Required<HubOptions>;
  readonly #channels: ActorRegistry<ChannelActor>;
  readonly #clients = new Set<Client>();
  readonly #perIdentity = new Map<string, number>();
  readonly #unsubscribe: (() => void)[] = [];
  #publish: TopicPublisher | undefined;
  readonly #bus: EventBus;

  constructor(bus: EventBus, opts: HubOptions = {}) {
    this.options = {
      channelIdleMs: opts.channelIdleMs ?? 60_000,
      maxConnectionsPerIdentity: opts.maxConnectionsPerIdentity ?? 1000,
      maxSubscriptionsPerConnection: opts.maxSubscriptionsPerConnection ?? 100,
      heartbeatMs: opts.heartbeatMs ?? 30_000,
      sseBufferBytes: opts.sseBufferBytes ?? 1024 * 1024,
      lsn: opts.lsn ?? false,
    };
    // Each live channel watches its project's events (a narrowing bus then routes them here).
    this.#channels = new ActorRegistry(
      watching(
        bus,
        (key) => key.slice(0, key.indexOf('|')),
        (key) => {
          const bar = key.indexOf('|');
          return new ChannelActor(key, key.slice(0, bar), parseChannel(key.slice(bar + 1))!, this.#publish);
        },
      ),
      { idleMs: this.options.channelIdleMs },
    );
    this.#bus = bus;
    this.#unsubscribe.push(
      bus.subscribeCommitted((e, mark, lsn) => this.#route(e, mark && streamId(mark.at, mark.id), lsn)),
    );
    this.#unsubscribe.push(bus.onLink((up) => this.#linked(up)));
    this.#unsubscribe.push(
      bus.subscribe((e) => {
        // After the key cache dropped the key (its listener may come after this one).
        if (e.type === 'key.changed') setTimeout(() => this.#recheck((c) => c.keyId === e.keyId), 0);
      }),
    );
  }

  /** The gateway's native topic publish (uWebSockets fan-out to `/_events` sockets). */
  setPublisher(publish: TopicPublisher): void {
    this.#publish = publish;
    for (const key of this.#channels.keys()) this.#channels.peek(key)?.setPublisher(publish);
  }

  #route(e: BusEvent, id: string | undefined, lsn: number | undefined): void {
    const f = framesOf(e, this.options.lsn ? lsn : undefined);
    if (!f) return;
    for (const name of f.channels) this.#channels.peek(keyOf(f.projectId, name))?.deliver(f.event, id);
  }

  /**
   * The events of a project's channel after SSE id `lastEventId`, from the bus's log (NATS), at
   * most as many as a channel's replay buffer keeps; null when the log cannot say.
   */
  async replay(
    projectId: string,
    channel: string,
    lastEventId: string,
  ): Promise<{ id: string; event: Omit<EventFrame, 'channel'> }[] | null> {
    const at = parseStreamId(lastEventId);
    if (!at) return null;
    const read = await this.#bus.replay(projectId, at.at, at.msgId, REPLAY_MAX);
    if (!read) return null;
    const out: { id: string; event: Omit<EventFrame, 'channel'> }[] = [];
    for (const { event, mark, lsn } of read) {
      const f = framesOf(event, this.options.lsn ? lsn : undefined);
      if (f && f.projectId === projectId && f.channels.includes(channel))
        out.push({ id: streamId(mark.at, mark.id), event: f.event });
    }
    return out;
  }

  /** The live actor of a project's channel, spawned on first use. */
  channel(projectId: string, channel: Channel): Promise<ChannelActor> {
    return this.#channels.get(keyOf(projectId, channel.name));
  }

  /** Counts a connection for its identity; throws TooManyConnections past the cap. */
  register(client: Client): () => void {
    const held = this.#perIdentity.get(client.identity) ?? 0;
    if (held >= this.options.maxConnectionsPerIdentity)
      throw new TooManyConnections(this.options.maxConnectionsPerIdentity, held);
    this.#perIdentity.set(client.identity, held + 1);
    this.#clients.add(client);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#clients.delete(client);
      const n = (this.#perIdentity.get(client.identity) ?? 1) - 1;
      if (n <= 0) this.#perIdentity.delete(client.identity);
      else this.#perIdentity.set(client.identity, n);
    };
  }

  /** Closes with 4403 every matching client whose credentials no longer hold. */
  #recheck(match: (c: Client) => boolean): void {
    for (const c of this.#clients) {
      if (!match(c)) continue;
      c.recheck().then(
        (ok) => ok || c.close(4403, 'Forbidden'),
        () => c.close(4403, 'Forbidden'),
      );
    }
  }

  /**
   * The bus went away or came back (NATS): every client hears it. Connections stay open; what
   * was committed meanwhile is delivered once the bus is back (docs/bus.md).
   */
  #linked(up: boolean): void {
    for (const c of this.#clients) {
      try {
        c.linked?.(up);
      } catch (err) {
        console.error('realtime bus frame failed:', err instanceof Error ? err.message : err);
      }
    }
  }

  /** A customer's session ended (logout, revocation): its connections close with 4403. */
  sessionRevoked(sessionId: string): void {
    this.#recheck((c) => c.sessionId === sessionId);
  }

  status(): { channels: number; clients: number } {
    let channels = 0;
    for (const key of this.#channels.keys()) if ((this.#channels.peek(key)?.subscribers ?? 0) > 0) channels++;
    return { channels, clients: this.#clients.size };
  }

  /** SIGTERM: every client gets a close it can reconnect on (1012), then the channels stop. */
  drain(): void {
    for (const c of [...this.#clients]) c.close(1012, 'Service restart');
  }

  async close(): Promise<void> {
    for (const u of this.#unsubscribe) u();
    this.drain();
    await this.#channels.stopAll();
  }
}
