import type * as Y from 'yjs';
import type * as awarenessProtocol from 'y-protocols/awareness';
import { Mailbox } from '../actors/mailbox.ts';
import type { Actor } from '../actors/registry.ts';
import { CloseCode, FrameError } from './protocol.ts';
import { logFailure, type Conn, type RoomInfo } from './room-host.ts';
import { RoomSaver, loadDoc, type SaverHost } from './room-persist.ts';
import type { LoadedDoc } from './room-load.ts';
import type { Lease } from './saver-lock.ts';
import type { DocSize } from './size.ts';
import { RoomSync } from './room-sync.ts';

export type { Conn, RoomInfo, RoomSocket } from './room-host.ts';

/** The room's window on its process: persistence, relay to other processes, local fan-out. */
export interface RoomHost extends SaverHost {
  /** Sends to every local socket subscribed to the topic. */
  publish(topic: string, data: Uint8Array): void;
  /** Sends a Yjs (0) or awareness (1) update to the other processes that have the room open. */
  relay(room: Room, kind: 0 | 1, data: Uint8Array, userId: string | null): void;
  /** The room has no sockets and nothing left to save: it may be unloaded now. */
  idle(room: Room): void;
  /** The room was stopped (unloaded). */
  unloaded(room: Room): void;
  /** The room's document can no longer be trusted: unload it now, without saving. */
  discard(room: Room): void;
}

type Msg =
  | { t: 'frame'; conn: Conn; data: Uint8Array }
  | { t: 'join'; conn: Conn }
  | { t: 'leave'; conn: Conn }
  | { t: 'remote'; kind: 0 | 1; data: Uint8Array; userId: string | null }
  | { t: 'save'; final: boolean }
  | { t: 'relock' }
  | { t: 'merge' }
  | { t: 'draft'; userId: string | null }
  | { t: 'peer'; processId: string; full: boolean };

/** Messages whose awaits are persistence only (their document work is synchronous). */
const PERSISTING = new Set<Msg['t']>(['save', 'leave', 'merge', 'relock', 'draft']);

/**
 * One collaboration room: a Yjs document and its awareness, seeded from the record, with the
 * sockets of this process. Hocuspocus' lifecycle: `load` (before the registry hands the room
 * out), live, then unloaded by the registry once no socket is left and the save is done (never
 * during one). Everything that touches the document goes through the mailbox, in order. How the
 * room is saved is its RoomSaver's business (room-persist.ts); how frames and relayed updates
 * reach the document and go out again, its RoomSync's (room-sync.ts).
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
  readonly #saver: RoomSaver;
  /** The document side: frames, relayed updates, awareness and their fan-out (room-sync.ts). */
  readonly #sync: RoomSync;
  #stopped = false;
  /** The message in flight only persists (see #direct). */
  #persisting = false;
  #lastUse = Date.now();

  private constructor(info: RoomInfo, host: RoomHost, loaded: LoadedDoc & { lease: Lease | null }) {
    this.info = info;
    this.#host = host;
    this.doc = loaded.doc;
    this.#mailbox = new Mailbox((m) => this.#handle(m));
    // The saver is told of every change by the sync side, which is built after it.
    let size: DocSize | undefined;
    this.#saver = new RoomSaver(info, host, loaded, {
      enqueue: () => this.#mailbox.tell({ t: 'save', final: false }, (e) => logFailure(this.key, e)),
      gone: () => this.#gone(),
      hold: () => this.#hold(),
      size: {
        get bytes() {
          return size!.bytes;
        },
        get total() {
          return size!.total;
        },
        get measuredAt() {
          return size!.measuredAt;
        },
        settled: (bytes, at) => size!.settled(bytes, at),
      },
    });
    this.#sync = new RoomSync(
      loaded.doc,
      {
        key: info.key,
        peers: this.peers,
        publish: (data) => host.publish(info.key, data),
        relay: (kind, data, userId) => host.relay(this, kind, data, userId),
        changed: (editor, update, fields) => this.#saver.changed(editor, update, fields),
        lastEditor: () => this.#saver.lastEditor,
        refused: () => void host.stats.refused++,
        broken: () => this.#discard(),
      },
      loaded.bytes,
    );
    size = this.#sync.size;
    this.awareness = this.#sync.awareness;
  }

  /** Loads the room (see loadDoc); the saver is the holder of the room's advisory lock. */
  static async load(info: RoomInfo, host: RoomHost): Promise<Room> {
    const lease = await host.locks.acquire(info.key);
    try {
      const loaded = await loadDoc(info, host.sql, lease !== null);
      return new Room(info, host, { ...loaded, lease });
    } catch (err) {
      if (lease) await host.locks.release(lease).catch(() => {});
      throw err;
    }
  }

  get key(): string {
    return this.info.key;
  }

  get isSaver(): boolean {
    return this.#saver.isSaver;
  }

  /** Saves written into the record, for diagnostics and the bench. */
  get saves(): number {
    return this.#saver.saves;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Adds a socket; false when the room was unloaded meanwhile (get a fresh one). */
  join(conn: Conn): boolean {
    if (this.#stopped || this.#sync.broken) return false;
    this.conns.add(conn);
    this.#lastUse = Date.now();
    if (!this.#direct()) this.#mailbox.tell({ t: 'join', conn }, (e) => this.#fail(conn, e));
    else
      this.#now(() => {
        try {
          this.#join(conn);
        } catch (err) {
          this.#fail(conn, err);
        }
      });
    return true;
  }

  /**
   * Runs a synchronous message that may be handled now (#direct) — at once, or, while a save
   * reads the document (#hold), as soon as the read is over, in arrival order.
   */
  #now(run: () => void): void {
    if (this.#held) this.#held.push(run);
    else run();
  }

  /** What arrived while a save reads the document (null: no read under way). */
  #held: (() => void)[] | null = null;

  /**
   * A save reads the document's fields across event-loop turns (room-delta.ts readFields), so
   * the event loop serves other rooms and requests meanwhile: until it is done, frames, joins
   * and relayed updates of this room wait (#now) and run when the returned function is called —
   * before anything the mailbox holds after the save. The room's editors wait for the read (tens
   * of milliseconds for a 1,000,000-character field), never for the save's transaction.
   */
  #hold(): () => void {
    this.#held ??= [];
    return () => {
      const held = this.#held;
      this.#held = null;
      for (const run of held ?? []) run();
    };
  }

  /**
   * Whether a synchronous message (a frame, a join, a relayed update) may be handled now, in the
   * order the mailbox would keep: nothing is queued, and nothing is in flight but persistence
   * waiting on PostgreSQL. A save's document work is synchronous (merge the record, take the
   * delta) or holds the document (its field read, #hold), and it keeps what it has not saved
   * marked unsaved, so keystrokes need not wait for its transaction: under load a save takes
   * tens to hundreds of milliseconds, and every frame of the room used to queue behind it.
   */
  #direct(): boolean {
    if (this.#stopped) return false;
    const n = this.#mailbox.pending;
    return n === 0 || (n === 1 && this.#persisting);
  }

  frame(conn: Conn, data: Uint8Array): void {
    if (!this.#direct()) {
      this.#mailbox.tell({ t: 'frame', conn, data }, (e) => this.#fail(conn, e));
      return;
    }
    // Handling the frame now is the order the mailbox would keep (frames are handled
    // synchronously), without a promise and a microtask per keystroke.
    this.#lastUse = Date.now();
    if (this.#held) this.#held.push(() => this.#frameNow(conn, data));
    else this.#frameNow(conn, data);
  }

  #frameNow(conn: Conn, data: Uint8Array): void {
    try {
      this.#frame(conn, data);
    } catch (err) {
      this.#fail(conn, err);
    }
  }

  leave(conn: Conn): void {
    if (!this.conns.delete(conn)) return;
    this.#mailbox.tell({ t: 'leave', conn }, (e) => logFailure(this.key, e));
  }

  remote(kind: 0 | 1, data: Uint8Array, userId: string | null): void {
    if (!this.#direct()) {
      this.#mailbox.tell({ t: 'remote', kind, data, userId }, (e) => logFailure(this.key, e));
      return;
    }
    this.#now(() => {
      try {
        this.#sync.remote(kind, data, userId);
      } catch (err) {
        logFailure(this.key, err);
      }
    });
  }

  /**
   * Another process has this room; `full` sends it our state. Settles once handled, so a caller
   * knows that what the mailbox held before (remote updates) is applied and our state is relayed.
   */
  peer(processId: string, full: boolean): Promise<void> {
    return this.#mailbox.ask({ t: 'peer', processId, full }).then(
      () => {},
      (e) => logFailure(this.key, e),
    );
  }

  /** A record write committed elsewhere (GraphQL, CLI): merge it into the document. */
  merge(): void {
    this.#mailbox.tell({ t: 'merge' }, (e) => logFailure(this.key, e));
  }

  /** The process lost its lock session: re-acquire the room's lock or leave it to another process. */
  relock(): void {
    this.#mailbox.tell({ t: 'relock' }, (e) => logFailure(this.key, e));
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
    return (
      this.conns.size === 0 &&
      this.#pins === 0 &&
      this.#held === null &&
      this.#mailbox.pending === 0 &&
      !this.#saver.unsaved
    );
  }

  #pins = 0;
  /** Keeps the room loaded without a socket (a save waiting for other processes' state). */
  pin(): () => void {
    this.#pins++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#pins--;
    };
  }

  idleSince(): number {
    return Math.max(this.#lastUse, this.#mailbox.idleSince);
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#saver.halt();
    await this.#mailbox.close();
    await this.#saver.release();
    this.awareness.destroy();
    this.doc.destroy();
    this.#host.unloaded(this);
  }

  #fail(conn: Conn, err: unknown): void {
    if (err instanceof FrameError) conn.ws.close(err.code, err.message);
    else {
      logFailure(this.key, err);
      conn.ws.close(CloseCode.BadFrame, 'frame rejected');
    }
  }

  async #handle(m: Msg): Promise<unknown> {
    this.#lastUse = Date.now();
    this.#persisting = PERSISTING.has(m.t);
    try {
      return await this.#dispatch(m);
    } finally {
      this.#persisting = false;
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
        return this.#sync.remote(m.kind, m.data, m.userId);
      case 'peer':
        this.peers.add(m.processId);
        if (m.full) this.#sync.sendFullState();
        return;
      case 'merge':
        return this.#saver.merge();
      case 'save':
        return this.#saver.save(m.final);
      case 'relock':
        return this.#saver.relock();
      case 'draft':
        return this.#saver.saveDraft(m.userId);
    }
  }

  #join(conn: Conn): void {
    if (!this.conns.has(conn)) return;
    conn.ws.subscribe(this.key);
    this.#sync.greet(conn);
  }

  async #leave(conn: Conn): Promise<void> {
    conn.ws.unsubscribe(this.key);
    this.#sync.forget(conn);
    if (this.conns.size > 0) return;
    // The last editor left: save now, then let the registry unload the room.
    await this.#saver.save(true);
  }

  #frame(conn: Conn, data: Uint8Array): void {
    if (!this.conns.has(conn)) return;
    this.#sync.frame(conn, data);
  }

  /**
   * The document holds part of an update that failed (room-sync.ts): it is no longer what any
   * editor has, so it is neither sent nor saved. Every socket is told to reconnect (1012): the
   * editors' own documents hold every edit they made, and their sync with the reloaded room
   * (stored state and record) sends those edits again; only edits of editors who already left
   * and were not saved yet (at most the debounce window) are lost with it.
   */
  #discard(): void {
    this.#saver.halt();
    console.error(`collab room ${this.key}: an update failed half-way; the room reloads`);
    this.closeAll(CloseCode.Restart, 'room reloading');
    this.#host.discard(this);
  }

  #gone(): void {
    this.closeAll(CloseCode.RecordGone, 'record deleted');
  }
}
