import type { RoomWire } from '../bus/bus.ts';

/**
 * How the rooms of several processes stay one room on the NATS bus (`SVC_BUS_URL=nats://…`):
 * updates, awareness and the join / here / leave notices travel on the room's own NATS subject
 * (`<prefix>_rooms.<room key>`, core NATS beside the event stream), so a process hears only the
 * rooms it has open and nothing goes through PostgreSQL rows. One connection publishes in order,
 * so a process's state still arrives before its `here`. NATS drops what is published while it
 * is away; when the link is back every process re-announces its rooms and the peers exchange
 * full states (Yjs merges them), so editors converge again.
 */
export type RoomNotice =
  | { t: 'u'; p: string; r: string; k: 0 | 1; u: string | null; d: string }
  | { t: 'join' | 'leave'; p: string; r: string }
  | { t: 'here'; p: string; r: string; to: string };

const enc = new TextEncoder();
const dec = new TextDecoder();

export class NatsRoomRelay {
  readonly #wire: RoomWire;
  readonly #hear: (n: RoomNotice) => void;
  readonly #subs = new Map<string, () => void>();

  constructor(wire: RoomWire, hear: (n: RoomNotice) => void) {
    this.#wire = wire;
    this.#hear = hear;
  }

  /** Hears a room's subject (before announcing the room, so no answer is missed). */
  open(room: string): void {
    if (this.#subs.has(room)) return;
    this.#subs.set(
      room,
      this.#wire.subscribe(room, (data) => {
        let n: RoomNotice;
        try {
          n = JSON.parse(dec.decode(data));
        } catch {
          return;
        }
        if (n && typeof n.t === 'string' && n.r === room) this.#hear(n);
      }),
    );
  }

  close(room: string): void {
    this.#subs.get(room)?.();
    this.#subs.delete(room);
  }

  send(n: RoomNotice): void {
    this.#wire.publish(n.r, enc.encode(JSON.stringify(n)));
  }

  update(room: string, origin: string, kind: 0 | 1, userId: string | null, data: Uint8Array): void {
    this.send({ t: 'u', p: origin, r: room, k: kind, u: userId, d: Buffer.from(data).toString('base64') });
  }

  rooms(): string[] {
    return [...this.#subs.keys()];
  }

  closeAll(): void {
    for (const off of this.#subs.values()) off();
    this.#subs.clear();
  }
}
