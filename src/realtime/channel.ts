import { Mailbox } from '../actors/mailbox.ts';
import type { Actor } from '../actors/registry.ts';
import { dataFrame } from './protocol/sse.ts';
import { stringifyEvent, type EventFrame } from './protocol/frames.ts';
import type { Channel } from './protocol/channels.ts';

/** An SSE stream of this channel: `write` returns false once the stream was dropped. */
export interface SseSink {
  write(bytes: Uint8Array): boolean;
}

/** Publishes one text to every WebSocket subscribed to a topic (Bun.serve's uWebSockets pub/sub). */
export type TopicPublisher = (topic: string, text: string) => void;

/** Events kept for `Last-Event-ID` resumption: the last 256, at most 1 MiB. */
const REPLAY_EVENTS = 256;
const REPLAY_BYTES = 1024 * 1024;

/**
 * One live channel of one project in this process. Events arrive through the mailbox in the
 * order the bus heard them (commit order); each is serialised once: the JSON text goes to the
 * WebSocket topic in one native publish, the SSE frame's bytes to every stream as they are.
 * The actor outlives its last subscriber by the registry's idle time, keeping its replay buffer
 * for clients that reconnect with `Last-Event-ID`.
 */
export class ChannelActor implements Actor {
  readonly key: string;
  readonly topic: string;
  readonly projectId: string;
  readonly channel: Channel;
  readonly #mailbox: Mailbox<Omit<EventFrame, 'channel'>>;
  readonly #sse = new Set<SseSink>();
  readonly #listeners = new Set<(frame: EventFrame) => void>();
  #sockets = 0;
  readonly #replay: { seq: number; bytes: Uint8Array }[] = [];
  #replayBytes = 0;
  #seq = 0;
  /** Ids are `<epoch>-<seq>`: an id from an earlier incarnation of the channel matches nothing. */
  readonly #epoch = Date.now().toString(36);
  #lastUse = Date.now();
  #publish: TopicPublisher | undefined;

  constructor(key: string, projectId: string, channel: Channel, publish: TopicPublisher | undefined) {
    this.key = key;
    this.topic = key;
    this.projectId = projectId;
    this.channel = channel;
    this.#publish = publish;
    this.#mailbox = new Mailbox((e) => this.#fanOut(e));
  }

  get subscribers(): number {
    return this.#sse.size + this.#listeners.size + this.#sockets;
  }

  /** Queues an event for delivery (from the hub, in bus order). */
  deliver(event: Omit<EventFrame, 'channel'>): void {
    this.#mailbox.tell(event, (err) => console.error('channel delivery failed:', err instanceof Error ? err.message : err));
  }

  /** Resolves once every event queued so far went out. */
  idle(): Promise<void> {
    return this.#mailbox.idle();
  }

  /** Adds an SSE stream; first replays what it missed after `lastEventId`, when still buffered. */
  addStream(sink: SseSink, lastEventId: string | null): void {
    this.#lastUse = Date.now();
    if (lastEventId) {
      const [epoch, n] = lastEventId.split('-');
      const after = Number(n);
      if (epoch === this.#epoch && Number.isInteger(after)) {
        for (const e of this.#replay) if (e.seq > after && !sink.write(e.bytes)) return;
      }
    }
    this.#sse.add(sink);
  }

  removeStream(sink: SseSink): void {
    this.#lastUse = Date.now();
    this.#sse.delete(sink);
  }

  addSocket(): void {
    this.#lastUse = Date.now();
    this.#sockets++;
  }

  removeSocket(): void {
    this.#lastUse = Date.now();
    this.#sockets = Math.max(0, this.#sockets - 1);
  }

  /** In-process subscribers (GraphQL subscriptions); returns the remover. */
  listen(listener: (frame: EventFrame) => void): () => void {
    this.#lastUse = Date.now();
    this.#listeners.add(listener);
    return () => {
      this.#lastUse = Date.now();
      this.#listeners.delete(listener);
    };
  }

  setPublisher(publish: TopicPublisher | undefined): void {
    this.#publish = publish;
  }

  canUnload(): boolean {
    return this.subscribers === 0 && this.#mailbox.pending === 0;
  }

  idleSince(): number {
    return Math.max(this.#lastUse, this.#mailbox.idleSince);
  }

  async stop(): Promise<void> {
    await this.#mailbox.close();
  }

  #fanOut(e: Omit<EventFrame, 'channel'>): void {
    const frame: EventFrame = { channel: this.channel.name, event: e.event, data: e.data };
    const text = stringifyEvent(frame);
    if (this.#sockets > 0) this.#publish?.(this.topic, text);
    const seq = ++this.#seq;
    const bytes = dataFrame(`${this.#epoch}-${seq}`, text);
    this.#replay.push({ seq, bytes });
    this.#replayBytes += bytes.byteLength;
    while (this.#replay.length > REPLAY_EVENTS || this.#replayBytes > REPLAY_BYTES) this.#replayBytes -= this.#replay.shift()!.bytes.byteLength;
    for (const s of this.#sse) if (!s.write(bytes)) this.#sse.delete(s);
    for (const l of this.#listeners) l(frame);
  }
}
