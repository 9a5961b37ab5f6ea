import type { EventBus } from '../bus/bus.ts';
import type { ActorRegistry } from '../actors/registry.ts';
import type { Sql } from '../store/db.ts';
import type { Room } from './room.ts';
import { NatsRoomRelay, type RoomNotice } from './relay-nats.ts';
import { relayBatch, relayRows, remoteHolders, type RelayItem } from './store.ts';

const CHANNEL = 'svc_collab';
/**
 * How long `saveCollabDraft` on a process that just opened the room waits for the processes with
 * editors in it to send their state (one NOTIFY round trip and a row read each, normally
 * milliseconds); past it, it saves what it has rather than hang the request.
 */
const CATCH_UP_MS = 5_000;

/** Relay rows per statement at most (a statement's parameters stay well under a few MB). */
const RELAY_BATCH = 500;

type Notice =
  | { t: 'b'; p: string; lo: number; hi: number }
  | { t: 'u'; p: string; r: string; id: number }
  | { t: 'join' | 'leave'; p: string; r: string }
  | { t: 'here'; p: string; r: string; to: string };

/**
 * How a room open in several processes stays one room (sql/012_collab.sql): every update and
 * awareness change goes to the other processes as a row of `collab_updates`, written in batches
 * with one NOTIFY naming each batch, and the rows of announced batches are read for the rooms
 * open here; a process opening a room announces it ('join'), the processes that have it answer
 * with their full state and then 'here'. On the NATS bus the same notices travel on the room's
 * own subject instead (relay-nats.ts). The registry (rooms.ts) says which rooms are open here.
 */
export class RoomRelay {
  readonly #sql: Sql;
  readonly #bus: EventBus;
  readonly #processId: string;
  readonly #registry: ActorRegistry<Room>;
  #relayChain: Promise<unknown> = Promise.resolve();
  #fetchChain: Promise<unknown> = Promise.resolve();
  #relayQueue: RelayItem[] = [];
  /** Announced relay batches not fetched yet. */
  #pendingBatches: { p: string; lo: number; hi: number }[] = [];
  /** On the NATS bus: rooms talk on their own subjects instead of rows + NOTIFY (relay-nats.ts). */
  readonly #wire: NatsRoomRelay | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  /** One channel per postgres.js pool (store/db.ts connectListener). */
  readonly #listenSql: Sql;
  #unlink: (() => void) | undefined;
  /** room key → callbacks woken when a peer process answered our join ('here'). */
  readonly #hereWaiters = new Map<string, Set<() => void>>();

  constructor(sql: Sql, bus: EventBus, processId: string, registry: ActorRegistry<Room>, listenSql: Sql = sql) {
    this.#sql = sql;
    this.#listenSql = listenSql;
    this.#bus = bus;
    this.#processId = processId;
    this.#registry = registry;
    const wire = bus.roomWire;
    this.#wire = wire ? new NatsRoomRelay(wire, (n) => this.#onWire(n)) : undefined;
  }

  async start(): Promise<void> {
    if (this.#wire) {
      // NATS dropped what was sent while it was away: announce every open room again; the
      // peers answer with their full state and ours goes to them (join / here below).
      this.#unlink = this.#bus.onLink((up) => {
        if (up) for (const key of this.#wire!.rooms()) this.#notify({ t: 'join', p: this.#processId, r: key });
      });
    } else {
      const sub = await this.#listenSql.listen(CHANNEL, (payload) => this.#onNotice(payload));
      this.#unlisten = () => sub.unlisten();
    }
  }

  /** Sends a Yjs (0) or awareness (1) update of `room` to the other processes that have it open. */
  send(room: Room, kind: 0 | 1, data: Uint8Array, userId: string | null): void {
    if (this.#wire) {
      this.#wire.update(room.key, this.#processId, kind, userId, data);
      return;
    }
    // Batched: whatever queued while the previous batch was in flight goes in one statement
    // (rows + one NOTIFY), so the database work per keystroke falls as the load rises.
    this.#relayQueue.push({ room: room.key, kind, userId, data });
    if (this.#relayQueue.length === 1) this.#relayChain = this.#relayChain.then(() => this.#flushRelay());
  }

  /** A room was loaded here: hear it, then announce it (the processes that have it answer). */
  opened(key: string): void {
    this.#wire?.open(key);
    this.#notify({ t: 'join', p: this.#processId, r: key });
  }

  /** A room was unloaded here: `announce` tells the other processes (not while the process closes). */
  unloaded(key: string, announce: boolean): void {
    if (announce) this.#notify({ t: 'leave', p: this.#processId, r: key });
    this.#wire?.close(key);
  }

  /**
   * Waits (at most CATCH_UP_MS) until every other process with editors in `room` answered its
   * join: each relays its full state and then says 'here', in that order, and the answer is
   * handled after the state rows it follows (#onNotice), so the document then holds their edits.
   */
  async catchUp(room: Room): Promise<void> {
    const holders = await remoteHolders(this.#sql, room.key, this.#processId);
    const end = Date.now() + CATCH_UP_MS;
    while (!holders.every((p) => room.peers.has(p)) && Date.now() < end) {
      await new Promise<void>((resolve) => {
        let waiters = this.#hereWaiters.get(room.key);
        if (!waiters) this.#hereWaiters.set(room.key, (waiters = new Set()));
        const done = () => {
          clearTimeout(timer);
          waiters!.delete(done);
          if (waiters!.size === 0 && this.#hereWaiters.get(room.key) === waiters) this.#hereWaiters.delete(room.key);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, end - Date.now()));
        waiters.add(done);
      });
    }
  }

  /** Settles once every batch and notice queued so far is sent. */
  flushed(): Promise<unknown> {
    return this.#relayChain;
  }

  async close(): Promise<void> {
    await this.#unlisten?.().catch(() => {});
    this.#unlink?.();
    this.#wire?.closeAll();
  }

  #notify(n: Exclude<Notice, { t: 'u' | 'b' }>): void {
    if (this.#wire) {
      this.#wire.send(n);
      return;
    }
    this.#relayChain = this.#relayChain
      .then(() => this.#sql`select pg_notify(${CHANNEL}, ${JSON.stringify(n)})`)
      .catch(() => {});
  }

  /** A room's subject on NATS: updates go straight to the room, in arrival order. */
  #onWire(n: RoomNotice): void {
    if (n.p === this.#processId) return;
    if (n.t !== 'u') {
      this.#handle(n);
      return;
    }
    this.#registry.peek(n.r)?.remote(n.k, new Uint8Array(Buffer.from(n.d, 'base64')), n.u);
  }

  async #flushRelay(): Promise<void> {
    while (this.#relayQueue.length > 0) {
      const items = this.#relayQueue.splice(0, RELAY_BATCH);
      try {
        await relayBatch(this.#sql, CHANNEL, this.#processId, items);
      } catch (e) {
        console.error('collab relay failed:', e instanceof Error ? e.message : e);
      }
    }
  }

  #onNotice(payload: string): void {
    let n: Notice;
    try {
      n = JSON.parse(payload);
    } catch {
      return;
    }
    this.#handle(n);
  }

  #handle(n: Notice): void {
    if (n.p === this.#processId) return;
    if (n.t === 'b' || n.t === 'u') {
      // The rows say which rooms they belong to; only rooms open here are read.
      if (this.#registry.size === 0) return;
      this.#pendingBatches.push(n.t === 'b' ? { p: n.p, lo: n.lo, hi: n.hi } : { p: n.p, lo: n.id, hi: n.id });
      if (this.#pendingBatches.length === 1) this.#fetchChain = this.#fetchChain.then(() => this.#fetchRows());
      return;
    }
    const room = this.#registry.peek(n.r);
    if (!room) return;
    if (n.t === 'join') {
      // Our state is relayed before 'here' is sent (both go out through #relayChain, in order:
      // the batch holding the state is flushed before the NOTIFY queued after it), so the joiner
      // has it once it hears 'here'.
      void room.peer(n.p, true).then(() => this.#notify({ t: 'here', p: this.#processId, r: n.r, to: n.p }));
    } else if (n.t === 'here') {
      if (n.to !== this.#processId) return;
      // After the state rows that came before it are read and handed to the room.
      this.#fetchChain = this.#fetchChain
        .then(() => room.peer(n.p, true))
        .then(() => {
          for (const wake of [...(this.#hereWaiters.get(n.r) ?? [])]) wake();
        });
    } else room.peers.delete(n.p);
  }

  async #fetchRows(): Promise<void> {
    const batches = this.#pendingBatches;
    this.#pendingBatches = [];
    if (batches.length === 0) return;
    try {
      for (const row of await relayRows(this.#sql, batches))
        this.#registry.peek(row.room)?.remote(row.kind, row.data, row.user_id);
    } catch (e) {
      console.error('collab relay read failed:', e instanceof Error ? e.message : e);
    }
  }
}
