import * as Y from 'yjs';
import * as awarenessProtocol from 'y-protocols/awareness';
import { Mailbox } from '../actors/mailbox.ts';
import type { Actor } from '../actors/registry.ts';
import type { BusEvent, EventBus } from '../actors/bus.ts';
import type { Sql } from '../store/db.ts';
import { run } from '../content/db.ts';
import { runStep, updateRecord, type PendingEvent, type WriteContext } from '../content/write.ts';
import { changedFields, readContent, writeContent, type Content } from './content.ts';
import { CloseCode, FrameError, awarenessFrame, parseFrame, syncStep1Frame, syncStep2Frame, updateFrame } from './protocol.ts';
import { readDraft, writeState } from './store.ts';
import type { Conn, RoomInfo } from './room-host.ts';
import { loadDoc, validPatch } from './room-persist.ts';

export type { Conn, RoomInfo, RoomSocket } from './room-host.ts';

/** The room's window on its process: database, relay to other processes, local fan-out. */
export interface RoomHost {
  sql: Sql;
  /** Sends to every local socket subscribed to the topic. */
  publish(topic: string, data: Uint8Array): void;
  /** Sends a Yjs (0) or awareness (1) update to the other processes that have the room open. */
  relay(room: Room, kind: 0 | 1, data: Uint8Array, userId: string | null): void;
  /** The room's advisory lock: its holder is the one process that saves it. */
  tryLock(key: string): Promise<boolean>;
  unlock(key: string): Promise<void>;
  /** Record writes announce their events with the commit (bus.stage) like every write. */
  bus: EventBus;
  /** The room has no sockets and nothing left to save: it may be unloaded now. */
  idle(room: Room): void;
  /** The room was stopped (unloaded). */
  unloaded(room: Room): void;
  debounceMs: number;
  maxWaitMs: number;
}

type Msg =
  | { t: 'frame'; conn: Conn; data: Uint8Array }
  | { t: 'join'; conn: Conn }
  | { t: 'leave'; conn: Conn }
  | { t: 'remote'; kind: 0 | 1; data: Uint8Array; userId: string | null }
  | { t: 'save'; final: boolean }
  | { t: 'merge' }
  | { t: 'draft'; userId: string | null }
  | { t: 'peer'; processId: string; full: boolean };

/**
 * One collaboration room: a Yjs document and its awareness, seeded from the record, with the
 * sockets of this process. Hocuspocus' lifecycle: `load` (before the registry hands the room
 * out), live, then unloaded by the registry once no socket is left and the save is done (never
 * during one). Everything that touches the document goes through the mailbox, in order.
 */
export class Room implements Actor {
  readonly info: RoomInfo;
  readonly doc: Y.Doc;
  readonly awareness: awarenessProtocol.Awareness;
  readonly conns = new Set<Conn>();
  /** Other processes with this room open (they get our updates through PostgreSQL). */
  readonly peers = new Set<string>();
  readonly #host: RoomHost;
  readonly #mailbox: Mailbox<Msg, unknown>;
  /** The record content the document was last reconciled with (see sql/012_collab.sql). */
  #base: Content;
  #saver: boolean;
  #version = 0;
  #savedVersion = 0;
  #lastEditor: string | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #firstDirtyAt = 0;
  #stopped = false;
  #lastUse = Date.now();
  /** Saves written into the record, for diagnostics and the bench. */
  saves = 0;

  private constructor(info: RoomInfo, host: RoomHost, doc: Y.Doc, base: Content, saver: boolean) {
    this.info = info;
    this.#host = host;
    this.doc = doc;
    this.#base = base;
    this.#saver = saver;
    this.awareness = new awarenessProtocol.Awareness(doc);
    // The server is no participant: it announces no presence of its own.
    this.awareness.setLocalState(null);
    this.#mailbox = new Mailbox((m) => this.#handle(m));
    doc.on('update', (update: Uint8Array, origin: unknown) => this.#onUpdate(update, origin));
    this.awareness.on('update', (changes: { added: number[]; updated: number[]; removed: number[] }, origin: unknown) => this.#onAwareness(changes, origin));
  }

  /** Loads the room (see loadDoc); the saver is the holder of the room's advisory lock. */
  static async load(info: RoomInfo, host: RoomHost): Promise<Room> {
    const saver = await host.tryLock(info.key);
    try {
      const { doc, base, dirty } = await loadDoc(info, host.sql, saver);
      const room = new Room(info, host, doc, base, saver);
      if (dirty) room.#version = 1;
      return room;
    } catch (err) {
      if (saver) await host.unlock(info.key).catch(() => {});
      throw err;
    }
  }

  get key(): string {
    return this.info.key;
  }

  get isSaver(): boolean {
    return this.#saver;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Adds a socket; false when the room was unloaded meanwhile (get a fresh one). */
  join(conn: Conn): boolean {
    if (this.#stopped) return false;
    this.conns.add(conn);
    this.#lastUse = Date.now();
    this.#mailbox.tell({ t: 'join', conn }, (e) => this.#fail(conn, e));
    return true;
  }

  frame(conn: Conn, data: Uint8Array): void {
    this.#mailbox.tell({ t: 'frame', conn, data }, (e) => this.#fail(conn, e));
  }

  leave(conn: Conn): void {
    if (!this.conns.delete(conn)) return;
    this.#mailbox.tell({ t: 'leave', conn }, (e) => logFailure(this.key, e));
  }

  remote(kind: 0 | 1, data: Uint8Array, userId: string | null): void {
    this.#mailbox.tell({ t: 'remote', kind, data, userId }, (e) => logFailure(this.key, e));
  }

  peer(processId: string, full: boolean): void {
    this.#mailbox.tell({ t: 'peer', processId, full }, (e) => logFailure(this.key, e));
  }

  /** A record write committed elsewhere (GraphQL, CLI): merge it into the document. */
  merge(): void {
    this.#mailbox.tell({ t: 'merge' }, (e) => logFailure(this.key, e));
  }

  /** Saves now (the final save of SIGTERM, or before an unload). */
  flush(): Promise<unknown> {
    return this.#mailbox.ask({ t: 'save', final: true });
  }

  /** Writes the document into the record's working version (`saveCollabDraft`). */
  saveDraft(userId: string | null): Promise<boolean> {
    return this.#mailbox.ask({ t: 'draft', userId }) as Promise<boolean>;
  }

  /** Closes every socket (the record is gone, or the process stops). */
  closeAll(code: number, reason: string): void {
    for (const c of this.conns) c.ws.close(code, reason);
  }

  canUnload(): boolean {
    return this.conns.size === 0 && this.#mailbox.pending === 0 && !this.#unsaved();
  }

  idleSince(): number {
    return Math.max(this.#lastUse, this.#mailbox.idleSince);
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#mailbox.close();
    this.awareness.destroy();
    this.doc.destroy();
    if (this.#saver) await this.#host.unlock(this.key).catch(() => {});
    this.#host.unloaded(this);
  }

  #unsaved(): boolean {
    return this.#saver && this.#version !== this.#savedVersion;
  }

  #fail(conn: Conn, err: unknown): void {
    if (err instanceof FrameError) conn.ws.close(CloseCode.BadFrame, err.message);
    else {
      logFailure(this.key, err);
      conn.ws.close(CloseCode.BadFrame, 'frame rejected');
    }
  }

  async #handle(m: Msg): Promise<unknown> {
    this.#lastUse = Date.now();
    try {
      return await this.#dispatch(m);
    } finally {
      // Without sockets, the last message handled (a save, a merge) may free the room.
      if (this.conns.size === 0 && this.#mailbox.pending <= 1) this.#host.idle(this);
    }
  }

  async #dispatch(m: Msg): Promise<unknown> {
    switch (m.t) {
      case 'frame':
        return this.#frame(m.conn, m.data);
      case 'join':
        return this.#join(m.conn);
      case 'leave':
        return this.#leave(m.conn);
      case 'remote':
        if (m.kind === 0) {
          if (m.userId) this.#lastEditor = m.userId;
          Y.applyUpdate(this.doc, m.data, 'remote');
        } else awarenessProtocol.applyAwarenessUpdate(this.awareness, m.data, 'remote');
        return;
      case 'peer':
        this.peers.add(m.processId);
        if (m.full) this.#sendFullState();
        return;
      case 'merge':
        return this.#merge();
      case 'save':
        return this.#save(m.final);
      case 'draft':
        return this.#saveDraft(m.userId);
    }
  }

  #join(conn: Conn): void {
    if (!this.conns.has(conn)) return;
    conn.ws.subscribe(this.key);
    conn.ws.send(syncStep1Frame(this.doc));
    const states = [...this.awareness.getStates().keys()];
    if (states.length > 0) conn.ws.send(awarenessFrame(awarenessProtocol.encodeAwarenessUpdate(this.awareness, states)));
  }

  async #leave(conn: Conn): Promise<void> {
    conn.ws.unsubscribe(this.key);
    if (conn.awarenessIds.size > 0) awarenessProtocol.removeAwarenessStates(this.awareness, [...conn.awarenessIds], null);
    if (this.conns.size > 0) return;
    // The last editor left: save now, then let the registry unload the room.
    await this.#save(true);
  }

  #frame(conn: Conn, data: Uint8Array): void {
    if (!this.conns.has(conn)) return;
    const f = parseFrame(data);
    switch (f.type) {
      case 'sync-step1':
        conn.ws.send(syncStep2Frame(this.doc, f.stateVector));
        return;
      case 'sync-step2':
      case 'update':
        if (conn.readOnly) return;
        this.#lastEditor = conn.userId;
        Y.applyUpdate(this.doc, f.update, conn);
        return;
      case 'awareness':
        try {
          awarenessProtocol.applyAwarenessUpdate(this.awareness, f.update, conn);
        } catch {
          throw new FrameError('malformed awareness update');
        }
        return;
      case 'query-awareness': {
        const ids = [...this.awareness.getStates().keys()];
        conn.ws.send(awarenessFrame(awarenessProtocol.encodeAwarenessUpdate(this.awareness, ids)));
        return;
      }
      case 'auth':
        return;
    }
  }

  #onUpdate(update: Uint8Array, origin: unknown): void {
    if (origin === 'load') return;
    this.#version++;
    const frame = updateFrame(update);
    if (isConn(origin)) origin.ws.publish(this.key, frame);
    else this.#host.publish(this.key, frame);
    if (origin !== 'remote' && this.peers.size > 0) this.#host.relay(this, 0, update, this.#lastEditor);
    this.#schedule();
  }

  #onAwareness(changes: { added: number[]; updated: number[]; removed: number[] }, origin: unknown): void {
    if (isConn(origin)) {
      for (const id of changes.added) origin.awarenessIds.add(id);
      for (const id of changes.removed) origin.awarenessIds.delete(id);
    }
    const changed = [...changes.added, ...changes.updated, ...changes.removed];
    const update = awarenessProtocol.encodeAwarenessUpdate(this.awareness, changed);
    const frame = awarenessFrame(update);
    if (isConn(origin)) origin.ws.publish(this.key, frame);
    else this.#host.publish(this.key, frame);
    if (origin !== 'remote' && this.peers.size > 0) this.#host.relay(this, 1, update, null);
  }

  #sendFullState(): void {
    this.#host.relay(this, 0, Y.encodeStateAsUpdate(this.doc), this.#lastEditor);
    const ids = [...this.awareness.getStates().keys()];
    if (ids.length > 0) this.#host.relay(this, 1, awarenessProtocol.encodeAwarenessUpdate(this.awareness, ids), null);
  }

  /** Debounce: a save `debounceMs` after the last change, at most `maxWaitMs` after the first. */
  #schedule(): void {
    if (this.#stopped) return;
    const now = Date.now();
    if (this.#timer === undefined) this.#firstDirtyAt = now;
    else clearTimeout(this.#timer);
    const delay = Math.max(0, Math.min(this.#host.debounceMs, this.#firstDirtyAt + this.#host.maxWaitMs - now));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#mailbox.tell({ t: 'save', final: false }, (e) => logFailure(this.key, e));
    }, delay);
    this.#timer.unref?.();
  }

  /** One process saves a room: the holder of its advisory lock. The others stand by. */
  async #claim(): Promise<boolean> {
    if (!this.#saver && !this.#stopped) this.#saver = await this.#host.tryLock(this.key);
    return this.#saver;
  }

  async #save(final: boolean): Promise<void> {
    if (final && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#stopped || !(await this.#claim())) {
      this.#savedVersion = this.#version;
      return;
    }
    if (this.#version === this.#savedVersion) return;
    if (this.info.model.versioned === false) await this.#writeRecord(this.#lastEditor);
    else await this.#storeState();
  }

  /** Versioned models: the live state is kept (compacted), the working version is not touched. */
  async #storeState(): Promise<void> {
    const draft = await readDraft(this.#host.sql, this.info.projectId, this.info.model.key, this.info.recordId, this.info.locale, this.info.defaultLocale);
    if (draft === null) return this.#gone();
    this.#mergeOutside(draft);
    const version = this.#version;
    await writeState(this.#host.sql, this.key, { state: Y.encodeStateAsUpdate(this.doc), base: this.#base });
    this.#savedVersion = version;
  }

  async #saveDraft(userId: string | null): Promise<boolean> {
    return this.#writeRecord(userId);
  }

  /**
   * Writes the document into the record's working version (and, for unversioned models, the
   * published one) with the content layer's updateRecord, attributed to `userId`. Inside the
   * transaction the record is locked and read first: a write that committed since the last
   * reconciliation is merged into the document before the document is written back.
   */
  async #writeRecord(userId: string | null): Promise<boolean> {
    const { info } = this;
    const ctx: WriteContext = { projectId: info.projectId, defaultLocale: info.defaultLocale, userId, models: info.models };
    const toBus = (e: PendingEvent): BusEvent => ({ type: 'record.changed', projectId: info.projectId, action: e.action, recordId: e.recordId, modelKey: e.modelKey, userId });
    let event: BusEvent | undefined;
    let wrote = false;
    let base = this.#base;
    let version = this.#version;
    const ok = await this.#host.sql.begin(async (tx) => {
      const draft = await readDraft(tx, info.projectId, info.model.key, info.recordId, info.locale, info.defaultLocale, true);
      if (draft === null) return false;
      this.#mergeOutside(draft);
      const content = readContent(this.doc, info.model);
      const patch = validPatch(info, changedFields(content, draft));
      if (Object.keys(patch).length > 0) {
        const step = updateRecord(ctx, info.model, info.recordId, info.locale, patch);
        await runStep(tx as never, step);
        event = toBus(step.event);
        await this.#host.bus.stage((text, params) => run(tx as never, text, params), [event]);
        wrote = true;
      }
      base = { ...draft, ...patch };
      version = this.#version;
      await writeState(tx, this.key, { state: Y.encodeStateAsUpdate(this.doc), base });
      return true;
    });
    if (!ok) {
      this.#gone();
      return false;
    }
    this.#base = base;
    this.#savedVersion = version;
    if (wrote) {
      this.saves++;
      if (event) this.#host.bus.deliverLocal([event]);
    }
    return wrote;
  }

  /** Merges the difference between the record's working version and `base` into the document. */
  #mergeOutside(draft: Content): void {
    const outside = changedFields(draft, this.#base);
    if (Object.keys(outside).length > 0) writeContent(this.doc, this.info.model, outside, 'merge');
    this.#base = draft;
  }

  async #merge(): Promise<void> {
    if (!this.#saver || this.#stopped) return;
    const draft = await readDraft(this.#host.sql, this.info.projectId, this.info.model.key, this.info.recordId, this.info.locale, this.info.defaultLocale);
    if (draft === null) return this.#gone();
    this.#mergeOutside(draft);
  }

  #gone(): void {
    this.#savedVersion = this.#version;
    this.closeAll(CloseCode.RecordGone, 'record deleted');
  }
}

function isConn(origin: unknown): origin is Conn {
  return typeof origin === 'object' && origin !== null && 'ws' in origin && 'awarenessIds' in origin;
}


function logFailure(room: string, err: unknown): void {
  console.error(`collab room ${room}:`, err instanceof Error ? err.message : err);
}
