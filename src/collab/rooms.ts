import { randomUUID } from 'node:crypto';
import type { EventBus } from '../bus/bus.ts';
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
import { Compactor } from './compactor.ts';
import { RoomRelay } from './room-relay.ts';
import { forgetProcess, heartbeat, remoteClients, remoteHeldRooms, setPresence } from './store.ts';

/**
 * The collaboration rooms of one process: the room registry, the relay that makes a room open
 * in several processes one room (room-relay.ts: update rows + NOTIFY of their ids), the
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
  /** A room's stored log is compacted past this many rows (200) or bytes (1 MiB). */
  compactRows?: number;
  compactBytes?: number;
  /** How long a compaction may take before its worker is taken as stuck (ms; 60 s). */
  compactTimeoutMs?: number;
  /** How long a room whose compaction failed waits before the next try (ms; 30 s). */
  compactRetryMs?: number;
  /** The compactor's worker script (tests: one that hangs). */
  compactorWorker?: URL;
}

export interface CollabDeps {
  sql: Sql;
  bus: EventBus;
  project(id: string): Promise<ProjectSnapshot>;
  /** A connection of its own for the saver locks (store/db.ts connectSession). */
  lockSession(onclose: () => void): Sql;
  /** A pool for the relay's LISTEN alone (store/db.ts connectListener); default `sql`. */
  listenSql?: Sql;
  /** The content layer's write transactions: saves into records go through them. */
  writes: WriteCommitter;
  /** The database URL, for the compactor's connection (its worker thread's own); none: no compaction. */
  databaseUrl?: string;
}

const LOCALE_RE = /^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$/;

export class CollabRooms {
  readonly processId = randomUUID();
  readonly roomLimit: number;
  readonly registry: ActorRegistry<Room>;
  readonly #deps: CollabDeps;
  readonly #host: RoomHost;
  #server: { publish(topic: string, data: Uint8Array): unknown } | undefined;
  /** The saver election: one advisory lock per room this process saves (saver-lock.ts). */
  readonly locks: SaverLocks;
  /** Merges rooms' stored logs into their states on a worker thread (compactor.ts). */
  readonly compactor: Compactor | null;
  /** Autosave transactions committed and updates refused by field rules, in this process. */
  readonly stats = { saves: 0, refused: 0 };
  /** identity → room key → sockets, in this process. */
  readonly #holds = new Map<string, Map<string, number>>();
  /** record id → loaded room keys, for merges and deletes. */
  readonly #byRecord = new Map<string, Set<string>>();
  #unsubscribe: (() => void) | undefined;
  #beat: ReturnType<typeof setInterval> | undefined;
  #presenceChain: Promise<unknown> = Promise.resolve();
  /** Updates and notices to and from the room's other processes (room-relay.ts). */
  readonly #relay: RoomRelay;
  #closed = false;

  constructor(deps: CollabDeps, opts: CollabOptions = {}) {
    this.#deps = deps;
    this.roomLimit = opts.roomLimit ?? 10;
    // A lost lock session voids every room's lease: each one re-acquires or stands by.
    this.locks = new SaverLocks(deps.lockSession, () => {
      for (const key of this.registry.keys()) this.registry.peek(key)?.relock();
    });
    this.compactor = deps.databaseUrl
      ? new Compactor({
          url: deps.databaseUrl,
          timeoutMs: opts.compactTimeoutMs,
          retryMs: opts.compactRetryMs,
          workerUrl: opts.compactorWorker,
        })
      : null;
    this.#host = {
      compactor: this.compactor,
      compactRows: opts.compactRows ?? 200,
      compactBytes: opts.compactBytes ?? 1024 * 1024,
      sql: deps.sql,
      debounceMs: opts.debounceMs ?? 2_000,
      maxWaitMs: opts.maxWaitMs ?? 10_000,
      publish: (topic, data) => void this.#server?.publish(topic, data),
      relay: (room, kind, data, userId) => this.#relay.send(room, kind, data, userId),
      locks: this.locks,
      writes: deps.writes,
      stats: this.stats,
      unloaded: (room) => {
        const set = this.#byRecord.get(room.info.recordId);
        set?.delete(room.key);
        if (set?.size === 0) this.#byRecord.delete(room.info.recordId);
        this.#relay.unloaded(room.key, !this.#closed);
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
    this.#relay = new RoomRelay(deps.sql, deps.bus, this.processId, this.registry, deps.listenSql);
    this.#heartbeatMs = opts.heartbeatMs ?? 5_000;
  }

  readonly #heartbeatMs: number;

  /** The rooms' series on GET /metrics. */
  registerMetrics(m: MetricsRegistry): void {
    m.actors.add(() => Object.entries(this.registry.counts()).map(([state, n]) => [['room', state], n] as const));
    m.counterFrom(
      'svc_collab_saves_total',
      'Autosaves of collaboration rooms committed by this process (record writes and stored room states).',
      () => this.stats.saves,
    );
    m.counterFrom(
      'svc_collab_refused_updates_total',
      'Room updates refused by field access rules or read-only sockets.',
      () => this.stats.refused,
    );
    m.counterFrom(
      'svc_collab_compactions_total',
      "Rooms' stored update logs merged into their states by this process's compactor worker.",
      () => this.compactor?.stats.compactions ?? 0,
    );
    m.counterFrom(
      'svc_collab_compaction_failures_total',
      'Compactions skipped because the worker failed, timed out or died (tried again later; nothing is lost).',
      () => this.compactor?.stats.failures ?? 0,
    );
    m.counterFrom(
      'svc_collab_lock_losses_total',
      'Saver lock sessions lost (their rooms re-acquired or handed over).',
      () => this.locks.losses,
    );
  }

  get sql(): Sql {
    return this.#deps.sql;
  }

  async start(): Promise<void> {
    await this.#relay.start();
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
    this.#relay.opened(key);
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
      if (fresh) await this.#relay.catchUp(room);
      saved = await room.saveDraft(userId);
    } finally {
      unpin();
    }
    if (room.conns.size === 0) this.#host.idle(room);
    return saved;
  }

  /** SIGTERM: every room saves, then its sockets are told to reconnect elsewhere. */
  async drain(): Promise<void> {
    const rooms = [...this.registry.keys()].map((k) => this.registry.peek(k)!).filter(Boolean);
    const flushAll = () =>
      Promise.all(
        rooms.map((r) =>
          r.flush().catch((e) => console.error('collab final save failed:', e instanceof Error ? e.message : e)),
        ),
      );
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
    await this.#relay.flushed();
    await this.#presenceChain;
    await this.#relay.close();
    // After the final saves: a compaction in flight gets a bounded moment, then the worker ends.
    await this.compactor?.close();
    await forgetProcess(this.#deps.sql, this.processId).catch(() => {});
    await this.locks.close();
  }
}
