import { createHash } from 'node:crypto';
import { Mailbox } from '../actors/mailbox.ts';
import type { Actor } from '../actors/registry.ts';
import { dataFrame } from './protocol/sse.ts';
import { stringifyEvent, type EventFrame } from './protocol/frames.ts';
import type { Channel } from './protocol/channels.ts';

/** An SSE stream of this channel: `write` returns false once the stream was dropped. */
export interface SseSink {
  write(bytes: Uint8Array): boolean;
}

/** Events read back from the bus's log for a `Last-Event-ID` this process does not hold; null: none. */
export type StreamReplay = (
  lastEventId: string,
) => Promise<{ id: string; event: Omit<EventFrame, 'channel'> }[] | null>;

/**
 * SSE ids of events heard with a place in a replayable bus (NATS): `n.<written at ms>.<outbox
 * id>`, the same in every gateway, so a client may resume on any of them. Others: `<epoch>-<seq>`.
 */
export const streamId = (at: number, msgId: string) => `n.${at}.${msgId}`;
export function parseStreamId(id: string): { at: number; msgId: string } | null {
  const m = /^n\.(\d{1,15})\.(\d{1,19})$/.exec(id);
  return m ? { at: Number(m[1]), msgId: m[2]! } : null;
}

/** Publishes one text to every WebSocket subscribed to a topic (Bun.serve's uWebSockets pub/sub). */
export type TopicPublisher = (topic: string, text: string) => void;

/** The model of a change event (`changes:*` views filter on it); undefined for other events. */
function modelOf(event: Omit<EventFrame, 'channel'>): string | undefined {
  const m = (event.data as { modelKey?: unknown } | undefined)?.modelKey;
  return typeof m === 'string' ? m : undefined;
}

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
  readonly #mailbox: Mailbox<{ event: Omit<EventFrame, 'channel'>; id: string | undefined }>;
  readonly #sse = new Set<SseSink>();
  /**
   * `changes:*` for holders who may read only some models: per SSE stream its models, and per
   * distinct model set one WebSocket topic (`<topic>#<hash>`) fed only that set's events.
   */
  readonly #streamModels = new Map<SseSink, ReadonlySet<string>>();
  readonly #views = new Map<string, { models: ReadonlySet<string>; sockets: number }>();
  /** Streams still being replayed from the bus's log: live frames wait here, with their ids. */
  readonly #holding = new Map<SseSink, { id: string; bytes: Uint8Array }[]>();
  readonly #listeners = new Set<(frame: EventFrame) => void>();
  #sockets = 0;
  #viewSockets = 0;
  readonly #replay: { seq: number; id: string; bytes: Uint8Array; model: string | undefined }[] = [];
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
    return this.#sse.size + this.#listeners.size + this.#sockets + this.#viewSockets;
  }

  /** Queues an event for delivery (from the hub, in bus order). */
  deliver(event: Omit<EventFrame, 'channel'>, id?: string): void {
    this.#mailbox.tell({ event, id }, (err) =>
      console.error('channel delivery failed:', err instanceof Error ? err.message : err),
    );
  }

  /** Resolves once every event queued so far went out. */
  idle(): Promise<void> {
    return this.#mailbox.idle();
  }

  /**
   * Adds an SSE stream; first replays what it missed after `lastEventId`, when still buffered.
   * `models`: the stream hears only events of these models (`changes:*` of a holder who may
   * read only some); none: every event.
   */
  addStream(
    sink: SseSink,
    lastEventId: string | null,
    fromLog?: StreamReplay,
    models?: ReadonlySet<string> | null,
  ): void {
    this.#lastUse = Date.now();
    if (models) this.#streamModels.set(sink, models);
    const wants = (model: string | undefined) => !models || (model !== undefined && models.has(model));
    if (lastEventId) {
      const held = this.#replay.findIndex((e) => e.id === lastEventId);
      if (held >= 0) {
        for (const e of this.#replay.slice(held + 1))
          if (wants(e.model) && !sink.write(e.bytes)) return void this.#streamModels.delete(sink);
        this.#sse.add(sink);
        return;
      }
      const [epoch, n] = lastEventId.split('-');
      const after = Number(n);
      if (epoch === this.#epoch && Number.isInteger(after)) {
        for (const e of this.#replay)
          if (e.seq > after && wants(e.model) && !sink.write(e.bytes)) return void this.#streamModels.delete(sink);
      } else if (fromLog && parseStreamId(lastEventId)) {
        this.#resume(sink, lastEventId, fromLog);
        return;
      }
    }
    this.#sse.add(sink);
  }

  /**
   * Not in this process's buffer (another gateway served the client, or the channel was
   * unloaded): the missed events come from the bus's log. Live events wait meanwhile and are
   * sent after, without the ones the log already gave.
   */
  #resume(sink: SseSink, lastEventId: string, fromLog: StreamReplay): void {
    const waiting: { id: string; bytes: Uint8Array }[] = [];
    this.#holding.set(sink, waiting);
    this.#sse.add(sink);
    const sent = new Set<string>();
    fromLog(lastEventId)
      .then(
        (events) => {
          const models = this.#streamModels.get(sink);
          for (const e of events ?? []) {
            sent.add(e.id);
            if (models) {
              const m = modelOf(e.event);
              if (m === undefined || !models.has(m)) continue;
            }
            if (
              !sink.write(
                dataFrame(
                  e.id,
                  stringifyEvent({ channel: this.channel.name, event: e.event.event, data: e.event.data }),
                ),
              )
            )
              return false;
          }
          return true;
        },
        (err) => {
          console.error('sse replay from the bus failed:', err instanceof Error ? err.message : err);
          return true;
        },
      )
      .then((open) => {
        this.#holding.delete(sink);
        if (!open) return void this.#sse.delete(sink);
        for (const w of waiting) if (!sent.has(w.id) && !sink.write(w.bytes)) return void this.#sse.delete(sink);
      });
  }

  removeStream(sink: SseSink): void {
    this.#lastUse = Date.now();
    this.#sse.delete(sink);
    this.#holding.delete(sink);
    this.#streamModels.delete(sink);
  }

  /**
   * Counts a WebSocket subscriber and answers the topic it must subscribe to: the channel's, or
   * with `models`, the topic of that model set's view (created on first use).
   */
  addSocket(models?: ReadonlySet<string> | null): string {
    this.#lastUse = Date.now();
    if (!models) {
      this.#sockets++;
      return this.topic;
    }
    const topic = `${this.topic}#${createHash('sha256')
      .update([...models].sort().join(','))
      .digest('hex')
      .slice(0, 24)}`;
    const view = this.#views.get(topic);
    if (view) view.sockets++;
    else this.#views.set(topic, { models, sockets: 1 });
    this.#viewSockets++;
    return topic;
  }

  /** Undoes addSocket for the topic it answered. */
  removeSocket(topic: string = this.topic): void {
    this.#lastUse = Date.now();
    if (topic === this.topic) {
      this.#sockets = Math.max(0, this.#sockets - 1);
      return;
    }
    const view = this.#views.get(topic);
    if (!view) return;
    this.#viewSockets = Math.max(0, this.#viewSockets - 1);
    if (--view.sockets <= 0) this.#views.delete(topic);
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

  #fanOut({ event: e, id: given }: { event: Omit<EventFrame, 'channel'>; id: string | undefined }): void {
    const frame: EventFrame = { channel: this.channel.name, event: e.event, data: e.data };
    const text = stringifyEvent(frame);
    if (this.#sockets > 0) this.#publish?.(this.topic, text);
    const model =
      this.#views.size > 0 || this.#streamModels.size > 0 || this.channel.kind === 'changes' ? modelOf(e) : undefined;
    if (model !== undefined)
      for (const [topic, v] of this.#views) if (v.models.has(model)) this.#publish?.(topic, text);
    const seq = ++this.#seq;
    const id = given ?? `${this.#epoch}-${seq}`;
    const bytes = dataFrame(id, text);
    this.#replay.push({ seq, id, bytes, model });
    this.#replayBytes += bytes.byteLength;
    while (this.#replay.length > REPLAY_EVENTS || this.#replayBytes > REPLAY_BYTES)
      this.#replayBytes -= this.#replay.shift()!.bytes.byteLength;
    // The plain loop unless a stream is being resumed from the log (no lookup per subscriber).
    if (this.#holding.size === 0 && this.#streamModels.size === 0) {
      for (const s of this.#sse) if (!s.write(bytes)) this.#sse.delete(s);
    } else {
      for (const s of this.#sse) {
        const only = this.#streamModels.get(s);
        if (only && (model === undefined || !only.has(model))) continue;
        const waiting = this.#holding.get(s);
        if (waiting) waiting.push({ id, bytes });
        else if (!s.write(bytes)) this.#sse.delete(s);
      }
    }
    for (const l of this.#listeners) l(frame);
  }
}
