import type { NatsConnection, Subscription } from 'nats';
import type { RoomWire } from '../contract.ts';
import { projectToken } from './wire.ts';

/**
 * Collaboration room traffic over plain NATS subjects (the transport's `roomWire`): neither
 * stored nor read by the event stream's consumers, sent only while linked (the rooms re-sync when
 * the link is back). Rooms subscribed before the first connect get their subscription then;
 * nats.js re-subscribes all of them after a reconnect.
 */
export class NatsRooms implements RoomWire {
  readonly #prefix: string;
  readonly #linked: () => boolean;
  readonly #rooms = new Map<string, { sub: Subscription | undefined; listeners: Set<(data: Uint8Array) => void> }>();
  #nc: NatsConnection | undefined;

  constructor(prefix: string, linked: () => boolean) {
    this.#prefix = prefix;
    this.#linked = linked;
  }

  /** The connection is up: rooms opened before it subscribe now. */
  attach(nc: NatsConnection): void {
    this.#nc = nc;
    for (const [room, r] of this.#rooms) r.sub ??= this.#subscribe(nc, room, r.listeners);
  }

  publish(room: string, data: Uint8Array): void {
    if (!this.#nc || !this.#linked()) return;
    try {
      this.#nc.publish(this.#subject(room), data);
    } catch {
      // Closed or draining: the rooms re-sync when the link is back.
    }
  }

  subscribe(room: string, onMessage: (data: Uint8Array) => void): () => void {
    let r = this.#rooms.get(room);
    if (!r) {
      r = { sub: undefined, listeners: new Set() };
      this.#rooms.set(room, r);
      if (this.#nc) r.sub = this.#subscribe(this.#nc, room, r.listeners);
    }
    r.listeners.add(onMessage);
    const entry = r;
    return () => {
      entry.listeners.delete(onMessage);
      if (entry.listeners.size > 0 || this.#rooms.get(room) !== entry) return;
      this.#rooms.delete(room);
      entry.sub?.unsubscribe();
    };
  }

  /** Outside the stream's `<prefix>.>`: room traffic is neither stored nor read by consumers. */
  #subject(room: string): string {
    return `${this.#prefix}_rooms.${projectToken(room)}`;
  }

  #subscribe(nc: NatsConnection, room: string, listeners: Set<(data: Uint8Array) => void>): Subscription {
    return nc.subscribe(this.#subject(room), {
      callback: (err, m) => {
        if (err) return;
        for (const l of listeners) l(m.data);
      },
    });
  }
}
