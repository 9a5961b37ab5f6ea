import { randomUUID } from 'node:crypto';
import type { EventBus } from '../actors/bus.ts';
import { ActorRegistry } from '../actors/registry.ts';
import type { Sql } from '../store/db.ts';
import type { WriteCommitter } from '../content/tx.ts';
import type { MetricsRegistry } from '../metrics/registry.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
import type { ModelDef } from '../projects/types.ts';
import { NotFound } from '../errors.ts';
import { CloseCode, DEFAULT_VARIANT, parseRoomName } from './protocol.ts';
import { Room, type RoomHost, type RoomInfo } from './room.ts';
import { SaverLocks } from './saver-lock.ts';
import { NatsRoomRelay, type RoomNotice } from './relay-nats.ts';
import { forgetProcess, heartbeat, relayBatch, relayRows, remoteClients, remoteHeldRooms, remoteHolders, setPresence, type RelayItem } from './store.ts';

/**
 * The collaboration rooms of one process: the room registry, the relay that makes a room open
 * in several processes one room (update rows + NOTIFY of their ids, sql/012_collab.sql), the
 * per-room advisory locks that elect one saver, presence for the room limit and room status,
 * and the bus hook that merges record writes into open rooms.
 */
export interface CollabOptions {
  /** Open rooms per identity (spec Limits: 10). */
  roomLimit?: number;
  debounceMs?: number;
  maxWaitMs?: number;
  /** How long an unused room without sockets may stay loaded (safety net; rooms unload at once). */
  idleMs?: number;
  heartbeatMs?: number;
}

export interface CollabDeps {
  sql: Sql;
  bus: EventBus;
  project(id: string): Promise<ProjectSnapshot>;
  /** A connection of its own for the saver locks (store/db.ts connectSession). */
  lockSession(onclose: () => void): Sql;
  /** The content layer's write transactions: saves into records go through them. */
  writes: WriteCommitter;
}

const CHANNEL = 'svc_collab';
/**
 * How long `saveCollabDraft` on a process that just opened the room waits for the processes with
 * editors in it to send their state (one NOTIFY round trip and a row read each, normally
 * milliseconds); past it, it saves what it has rather than hang the request.
 */
const CATCH_UP_MS = 5_000;
const LOCALE_RE = /^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$/;

/** Relay rows per statement at most (a statement's parameters stay well under a few MB). */
const RELAY_BATCH = 500;

type Notice =
  | { t: 'b'; p: string; lo: number; hi: number }
  | { t: 'u'; p: string; r: string; id: number }
  | { t: 'join' | 'leave'; p: string; r: string }
  | { t: 'here'; p: string; r: string; to: string };

export class CollabRooms {
  readonly processId = randomUUID();
  readonly roomLimit: number;
  readonly registry: ActorRegistry<Room>;
  readonly #deps: CollabDeps;
  readonly #host: RoomHost;
  #server: { publish(topic: string, data: Uint8Array): unknown } | undefined;
  /** The saver election: one advisory lock per room this process saves (saver-lock.ts). */
  readonly locks: SaverLocks;
  /** Autosave transactions committed and updates refused by field rules, in this process. */
  readonly stats = { saves: 0, refused: 0 };
  /** identity → room key → sockets, in this process. */
  readonly #holds = new Map<string, Map<string, number>>();
  /** record id → loaded room keys, for merges and deletes. */
  readonly #byRecord = new Map<string, Set<string>>();
  #unlisten: (() => Promise<void>) | undefined;
  #unsubscribe: (() => void) | undefined;
  #beat: ReturnType<typeof setInterval> | undefined;
  #relayChain: Promise<unknown> = Promise.resolve();
  #presenceChain: Promise<unknown> = Promise.resolve();
  #fetchChain: Promise<unknown> = Promise.resolve();
  #relayQueue: RelayItem[] = [];
  /** Announced relay batches not fetched yet. */
  #pendingBatches: { p: string; lo: number; hi: number }[] = [];
  /** On the NATS bus: rooms talk on their own subjects instead of rows + NOTIFY (relay-nats.ts). */
  readonly #wire: NatsRoomRelay | undefined;
  #unlink: (() => void) | undefined;
  /** room key → callbacks woken when a peer process answered our join ('here'). */
  readonly #hereWaiters = new Map<string, Set<() => void>>();
  #closed = false;

  constructor(deps: CollabDeps, opts: CollabOptions = {}) {
    this.#deps = deps;
    this.roomLimit = opts.roomLimit ?? 10;
    const wire = deps.bus.roomWire;
    this.#wire = wire ? new NatsRoomRelay(wire, (n) => this.#onWire(n)) : undefined;
    // A lost lock session voids every room's lease: each one re-acquires or stands by.
    this.locks = new SaverLocks(deps.lockSession, () => {
      for (const key of this.registry.keys()) this.registry.peek(key)?.relock();
    });
    this.#host = {
      sql: deps.sql,
      debounceMs: opts.debounceMs ?? 2_000,
      maxWaitMs: opts.maxWaitMs ?? 10_000,
      publish: (topic, data) => void this.#server?.publish(topic, data),
      relay: (room, kind, data, userId) => {
        if (this.#wire) return this.#wire.update(room.key, this.processId, kind, userId, data);
        // Batched: whatever queued while the previous batch was in flight goes in one statement
        // (rows + one NOTIFY), so the database work per keystroke falls as the load rises.
        this.#relayQueue.push({ room: room.key, kind, userId, data });
        if (this.#relayQueue.length === 1) this.#relayChain = this.#relayChain.then(() => this.#flushRelay());
      },
      locks: this.locks,
      writes: deps.writes,
      stats: this.stats,
      unloaded: (room) => {
        const set = this.#byRecord.get(room.info.recordId);
        set?.delete(room.key);
        if (set?.size === 0) this.#byRecord.delete(room.info.recordId);
        if (!this.#closed) this.#notify({ t: 'leave', p: this.processId, r: room.key });
        this.#wire?.close(room.key);
      },
      discard: (room) => {
        if (this.registry.peek(room.key) === room) void this.registry.evict(room.key);
      },
      idle: (room) => {
        // Outside the room's mailbox: stopping waits for it to drain.
        setTimeout(() => {
          if (this.registry.peek(room.key) === room && room.canUnload()) void this.registry.evict(room.key);
        }, 0);
      },
    };
    this.registry = new ActorRegistry<Room>((key) => this.#spawn(key), { idleMs: opts.idleMs ?? 30_000 });
    this.#heartbeatMs = opts.heartbeatMs ?? 5_000;
  }

  readonly #heartbeatMs: number;

  /** The rooms' series on GET /metrics. */
  registerMetrics(m: MetricsRegistry): void {
    m.actors.add(() => Object.entries(this.registry.counts()).map(([state, n]) => [['room', state], n] as const));
    m.counterFrom('svc_collab_saves_total', 'Autosaves of collaboration rooms committed by this process (record writes and stored room states).', () => this.stats.saves);
    m.counterFrom('svc_collab_refused_updates_total', 'Room updates refused by field access rules or read-only sockets.', () => this.stats.refused);
    m.counterFrom('svc_collab_lock_losses_total', 'Saver lock sessions lost (their rooms re-acquired or handed over).', () => this.locks.losses);
  }

  get sql(): Sql {
    return this.#deps.sql;
  }

  async start(): Promise<void> {
    if (this.#wire) {
      // NATS dropped what was sent while it was away: announce every open room again; the
      // peers answer with their full state and ours goes to them (join / here below).
      this.#unlink = this.#deps.bus.onLink((up) => {
        if (up) for (const key of this.#wire!.rooms()) this.#notify({ t: 'join', p: this.processId, r: key });
      });
    } else {
      const sub = await this.#deps.sql.listen(CHANNEL, (payload) => this.#onNotice(payload));
      this.#unlisten = () => sub.unlisten();
    }
    await heartbeat(this.#deps.sql, this.processId);
    this.#beat = setInterval(() => {
      void heartbeat(this.#deps.sql, this.processId).catch(() => {});
      void this.locks.check();
    }, this.#heartbeatMs);
    this.#beat.unref?.();
    this.#unsubscribe = this.#deps.bus.subscribe((e) => {
      if (e.type !== 'record.changed') return;
      const keys = this.#byRecord.get(e.recordId);
      if (!keys) return;
      for (const key of keys) {
        const room = this.registry.peek(key);
        if (!room || room.info.projectId !== e.projectId) continue;
        if (e.action === 'deleted') room.closeAll(CloseCode.RecordGone, 'record deleted');
        else if (e.action === 'updated' || e.action === 'created') room.merge();
      }
    });
  }

  /** The gateway's server: rooms publish to their topic through it. */
  attachServer(server: { publish(topic: string, data: Uint8Array): unknown }): void {
    this.#server = server;
  }

  /**
   * What a room name addresses in a project: its model, record and locale. NotFound when the
   * model or the record does not exist in this project (a record of another project included).
   */
  async resolve(projectId: string, name: string): Promise<{ info: RoomInfo; snapshot: ProjectSnapshot }> {
    const parsed = parseRoomName(name);
    if (!parsed) throw new NotFound('No such room');
    const snapshot = await this.#deps.project(projectId);
    const model = snapshot.models.find((m) => m.key === parsed.modelKey);
    if (!model) throw new NotFound(`No model "${parsed.modelKey}"`);
    const locale = parsed.variantId === DEFAULT_VARIANT ? snapshot.defaultLocale : parsed.variantId;
    if (!LOCALE_RE.test(locale)) throw new NotFound(`No variant "${parsed.variantId}"`);
    const all = new Map(snapshot.models.map((m) => [m.key, m] as [string, ModelDef]));
    const info: RoomInfo = {
      key: `${projectId}/${name}`,
      projectId,
      model,
      recordId: parsed.recordId,
      locale,
      defaultLocale: snapshot.defaultLocale,
      models: (k) => all.get(k),
    };
    return { info, snapshot };
  }

  async #spawn(key: string): Promise<Room> {
    const slash = key.indexOf('/');
    const { info } = await this.resolve(key.slice(0, slash), key.slice(slash + 1));
    const room = await Room.load(info, this.#host);
    let set = this.#byRecord.get(info.recordId);
    if (!set) this.#byRecord.set(info.recordId, (set = new Set()));
    set.add(key);
    this.#wire?.open(key);
    this.#notify({ t: 'join', p: this.processId, r: key });
    return room;
  }

  /** The live room for a key, loading it if needed. */
  room(key: string): Promise<Room> {
    return this.registry.get(key);
  }

  // ---- identities and limits ----

  /**
   * Whether `identity` may open one more socket to `key`: a room it holds already (here or in
   * another process) never counts twice. Returns the rooms held when the limit refuses it.
   */
  async checkLimit(identity: string, key: string): Promise<{ ok: true } | { ok: false; held: number }> {
    const local = this.#holds.get(identity);
    if (local?.has(key)) return { ok: true };
    const held = new Set(local?.keys() ?? []);
    for (const r of await remoteHeldRooms(this.#deps.sql, identity, this.processId)) held.add(r);
    if (held.has(key) || held.size < this.roomLimit) return { ok: true };
    return { ok: false, held: held.size };
  }

  hold(identity: string, key: string): void {
    let rooms = this.#holds.get(identity);
    if (!rooms) this.#holds.set(identity, (rooms = new Map()));
    const n = (rooms.get(key) ?? 0) + 1;
    rooms.set(key, n);
    this.#presence(key, identity, n);
  }

  release(identity: string, key: string): void {
    const rooms = this.#holds.get(identity);
    const n = (rooms?.get(key) ?? 0) - 1;
    if (n > 0) rooms!.set(key, n);
    else {
      rooms?.delete(key);
      if (rooms?.size === 0) this.#holds.delete(identity);
    }
    this.#presence(key, identity, Math.max(0, n));
  }

  #presence(key: string, identity: string, clients: number): void {
    this.#presenceChain = this.#presenceChain
      .then(() => setPresence(this.#deps.sql, key, this.processId, identity, clients))
      .catch((e) => console.error('collab presence failed:', e instanceof Error ? e.message : e));
  }

  /** `{ exists, clients }` of a room name across every process (GET /api/collab/room-status). */
  async status(name: string): Promise<{ exists: boolean; clients: number }> {
    await this.#presenceChain;
    let local = 0;
    let loaded = false;
    for (const key of this.registry.keys()) {
      if (!key.endsWith(`/${name}`)) continue;
      loaded = true;
      local += this.registry.peek(key)?.conns.size ?? 0;
    }
    const remote = await remoteClients(this.#deps.sql, name, this.processId);
    return { exists: loaded || remote > 0, clients: local + remote };
  }

  // ---- saves ----

  /** `saveCollabDraft(roomName)`: the room's document into the record's working version. */
  async saveDraft(projectId: string, name: string, userId: string | null): Promise<boolean> {
    const { info } = await this.resolve(projectId, name);
    const fresh = !this.registry.peek(info.key);
    const room = await this.room(info.key);
    // Opened here for this save (an API process, the editors on gateways): their edits are not
    // in the record yet, so take them in first (three processes behave as one).
    const unpin = room.pin();
    let saved: boolean;
    try {
      if (fresh) await this.#catchUp(room);
      saved = await room.saveDraft(userId);
    } finally {
      unpin();
    }
    if (room.conns.size === 0) this.#host.idle(room);
    return saved;
  }

  /**
   * Waits (at most CATCH_UP_MS) until every other process with editors in `room` answered its
   * join: each relays its full state and then says 'here', in that order, and the answer is
   * handled after the state rows it follows (#onNotice), so the document then holds their edits.
   */
  async #catchUp(room: Room): Promise<void> {
    const holders = await remoteHolders(this.#deps.sql, room.key, this.processId);
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

  /** SIGTERM: every room saves, then its sockets are told to reconnect elsewhere. */
  async drain(): Promise<void> {
    const rooms = [...this.registry.keys()].map((k) => this.registry.peek(k)!).filter(Boolean);
    const flushAll = () => Promise.all(rooms.map((r) => r.flush().catch((e) => console.error('collab final save failed:', e instanceof Error ? e.message : e))));
    await flushAll();
    for (const r of rooms) r.closeAll(CloseCode.Restart, 'server restarting');
    // Frames applied (and so relayed: acknowledged) while the first saves ran are saved too;
    // a closed socket delivers nothing more. Rooms with nothing new do no SQL here.
    await flushAll();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.drain();
    this.#closed = true;
    clearInterval(this.#beat);
    this.#unsubscribe?.();
    await this.registry.stopAll();
    await this.#relayChain;
    await this.#presenceChain;
    await this.#unlisten?.().catch(() => {});
    this.#unlink?.();
    this.#wire?.closeAll();
    await forgetProcess(this.#deps.sql, this.processId).catch(() => {});
    await this.locks.close();
  }

  // ---- relay between processes ----

  #notify(n: Exclude<Notice, { t: 'u' | 'b' }>): void {
    if (this.#wire) return this.#wire.send(n);
    this.#relayChain = this.#relayChain
      .then(() => this.#deps.sql`select pg_notify(${CHANNEL}, ${JSON.stringify(n)})`)
      .catch(() => {});
  }

  /** A room's subject on NATS: updates go straight to the room, in arrival order. */
  #onWire(n: RoomNotice): void {
    if (n.p === this.processId) return;
    if (n.t !== 'u') return this.#handle(n);
    this.registry.peek(n.r)?.remote(n.k, new Uint8Array(Buffer.from(n.d, 'base64')), n.u);
  }

  async #flushRelay(): Promise<void> {
    while (this.#relayQueue.length > 0) {
      const items = this.#relayQueue.splice(0, RELAY_BATCH);
      try {
        await relayBatch(this.#deps.sql, CHANNEL, this.processId, items);
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
    if (n.p === this.processId) return;
    if (n.t === 'b' || n.t === 'u') {
      // The rows say which rooms they belong to; only rooms open here are read.
      if (this.registry.size === 0) return;
      this.#pendingBatches.push(n.t === 'b' ? { p: n.p, lo: n.lo, hi: n.hi } : { p: n.p, lo: n.id, hi: n.id });
      if (this.#pendingBatches.length === 1) this.#fetchChain = this.#fetchChain.then(() => this.#fetchRows());
      return;
    }
    const room = this.registry.peek(n.r);
    if (!room) return;
    if (n.t === 'join') {
      // Our state is relayed before 'here' is sent (both go out through #relayChain, in order:
      // the batch holding the state is flushed before the NOTIFY queued after it), so the joiner
      // has it once it hears 'here'.
      void room.peer(n.p, true).then(() => this.#notify({ t: 'here', p: this.processId, r: n.r, to: n.p }));
    } else if (n.t === 'here') {
      if (n.to !== this.processId) return;
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
      for (const row of await relayRows(this.#deps.sql, batches)) this.registry.peek(row.room)?.remote(row.kind, row.data, row.user_id);
    } catch (e) {
      console.error('collab relay read failed:', e instanceof Error ? e.message : e);
    }
  }
}
