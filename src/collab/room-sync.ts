import * as Y from 'yjs';
import * as awarenessProtocol from 'y-protocols/awareness';
import {
  CloseCode,
  FrameError,
  awarenessFrame,
  parseFrame,
  permissionDeniedFrame,
  syncStep1Frame,
  syncStep2Frame,
  syncStep2FrameOf,
  updateFrame,
} from './protocol.ts';
import { refusedPlaces, skipUpdate } from './guard.ts';
import { checkSize, DocSize, SIZE_LIMITS } from './size.ts';
import { changed, isConn, type Conn } from './room-host.ts';
import { contentMap, touchedFields } from './content.ts';

/** The kept full state (RoomSync #full): for documents of at least this many bytes of Yjs state. */
const FULL_MIN_BYTES = 256 * 1024;
/** Dropped once the updates made since it was encoded pass this many bytes… */
const FULL_MAX_SINCE = 1024 * 1024;
/** …or this long after the last joiner it served. */
const FULL_IDLE_MS = 60_000;

/** The state vector of a document with nothing in it (a single zero: no clients). */
function isEmptyStateVector(sv: Uint8Array): boolean {
  return sv.length === 1 && sv[0] === 0;
}

/** What a room's document side needs of the room (room.ts). */
export interface RoomSyncHost {
  /** The room's key: the topic of its sockets. */
  readonly key: string;
  /** Other processes with the room open (they get our updates through the relay). */
  readonly peers: ReadonlySet<string>;
  /** Sends to every local socket of the room. */
  publish(data: Uint8Array): void;
  /** Sends a Yjs (0) or awareness (1) update to the room's other processes. */
  relay(kind: 0 | 1, data: Uint8Array, userId: string | null): void;
  /**
   * The document changed (by `editor` when known) by `update`, touching `fields` (a set reused
   * after the call: copy what is kept): for the saver's debounce, its delta and the fields it
   * reads (room-delta.ts).
   */
  changed(editor: string | null, update: Uint8Array, fields: ReadonlySet<string>): void;
  /** The editor the saver would attribute the next save to. */
  lastEditor(): string | null;
  /** An update was refused by field rules (the process's counter). */
  refused(): void;
  /** An update failed half-way: nothing more is sent or saved; the room reloads. */
  broken(): void;
}

/** Update bytes being applied; `changed`: the sender, once the transaction changed the document. */
interface Incoming {
  update: Uint8Array;
  frame: Uint8Array | undefined;
  origin: unknown;
  changed: Conn | null | undefined;
  /** The fields its transaction touched. */
  fields: Set<string>;
}

/** The origin of a refused update's clock fill (guard.ts skipUpdate): sent like the editor's own. */
class Skipped {
  constructor(readonly conn: Conn) {}
}

/**
 * The document side of a room: its Yjs document and awareness, the y-websocket frames of its
 * sockets, updates relayed from other processes, and the fan-out of every change to the local
 * sockets and the other processes. Its methods run inside the room's mailbox (room.ts), which
 * owns the sockets, the lifecycle and the saver.
 */
export class RoomSync {
  readonly doc: Y.Doc;
  readonly awareness: awarenessProtocol.Awareness;
  readonly #host: RoomSyncHost;
  /** The editor of the relayed update being applied. */
  #remoteEditor: string | null = null;
  /**
   * The bytes being applied (#apply), sent on as they are once Yjs has applied them in full;
   * `changed` holds the sender while the transaction changed the document.
   */
  #incoming: Incoming | null = null;
  /** An update failed half-way: nothing more is applied, sent or saved from this document. */
  #broken = false;
  /**
   * The whole document as one update, kept for joiners that have nothing yet (a new editor, the
   * Studio opening the record), with the updates made since, in order: encoding a heavily edited
   * document near the 4 MiB limit held the event loop ~100 ms per such joiner (3.7 MB of 200,000
   * items, docs/collab.md). Kept for documents past FULL_MIN_BYTES only; dropped once the updates
   * since pass FULL_MAX_SINCE bytes, after FULL_IDLE_MS without such a joiner, and when the
   * document changes outside #changed (a load).
   */
  #full: { update: Uint8Array; since: Uint8Array[]; sinceBytes: number; usedAt: number } | null = null;
  /**
   * The fields a change touched, handed to the host synchronously (it copies what it keeps): one
   * set per path, reused, rather than one per keystroke.
   */
  readonly #incomingFields = new Set<string>();
  readonly #content: Y.Map<unknown>;
  readonly #ownFields = new Set<string>();
  /** The document's size in bytes of Yjs state, kept under SIZE_LIMITS.maxDocBytes (size.ts). */
  readonly size: DocSize;

  /** `bytes`: an upper bound of the document's size known at load (else it is measured). */
  constructor(doc: Y.Doc, host: RoomSyncHost, bytes?: number) {
    this.doc = doc;
    this.#host = host;
    this.size = new DocSize(doc, SIZE_LIMITS, bytes);
    this.#content = contentMap(doc);
    this.awareness = new awarenessProtocol.Awareness(doc);
    // The server is no participant: it announces no presence of its own.
    this.awareness.setLocalState(null);
    doc.on('afterTransaction', (tr: Y.Transaction) => this.#afterTransaction(tr));
    this.awareness.on('update', (changes: { added: number[]; updated: number[]; removed: number[] }, origin: unknown) =>
      this.#onAwareness(changes, origin),
    );
  }

  get broken(): boolean {
    return this.#broken;
  }

  /** A joining socket: the server's sync step 1 and the presences of the room. */
  greet(conn: Conn): void {
    conn.ws.send(syncStep1Frame(this.doc));
    const states = [...this.awareness.getStates().keys()];
    if (states.length > 0)
      conn.ws.send(awarenessFrame(awarenessProtocol.encodeAwarenessUpdate(this.awareness, states)));
  }

  /** A leaving socket: the presences it announced go. */
  forget(conn: Conn): void {
    if (conn.awarenessIds.size > 0)
      awarenessProtocol.removeAwarenessStates(this.awareness, [...conn.awarenessIds], null);
  }

  /** A Yjs (0) or awareness (1) update relayed from another process. */
  remote(kind: 0 | 1, data: Uint8Array, userId: string | null): void {
    if (this.#broken) return;
    if (kind === 0) {
      this.#remoteEditor = userId;
      this.#apply(data, 'remote');
    } else awarenessProtocol.applyAwarenessUpdate(this.awareness, data, 'remote');
  }

  /** A y-websocket frame of a socket of the room (FrameError: close it with its code, 4400 or 4413). */
  frame(conn: Conn, data: Uint8Array): void {
    if (this.#broken) return;
    const f = parseFrame(data);
    switch (f.type) {
      case 'sync-step1':
        if (isEmptyStateVector(f.stateVector) && this.size.bytes >= FULL_MIN_BYTES) this.#sendFull(conn);
        else conn.ws.send(syncStep2Frame(this.doc, f.stateVector));
        return;
      case 'sync-step2':
      case 'update': {
        const refused = refusedPlaces(conn.rule, this.doc, f.update, f.decoded);
        if (refused.length === 0) {
          // A field or the document past its limit: TooLargeError, the socket closes with 4413.
          checkSize(this.doc, this.size, f.update, f.decoded, SIZE_LIMITS);
          this.#apply(f.update, conn, f.type === 'update' ? data : undefined);
          return;
        }
        // Refused as a whole: nothing of it is applied, broadcast or saved; the editor is told.
        skipUpdate(this.doc, f.update, new Skipped(conn), f.decoded);
        this.#host.refused();
        conn.ws.send(
          permissionDeniedFrame(
            conn.rule?.all
              ? 'This connection is read-only: document updates are not accepted'
              : `No write access to field(s): ${refused.join(', ')}`,
          ),
        );
        return;
      }
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

  /**
   * After each document transaction: note the change for the saver, send it to this process's
   * other sockets (the topic) and to the room's other processes. An update that came in as bytes
   * (an editor's frame, a relayed update) goes out as those bytes: Yjs would only re-encode the
   * same update. Only the server's own changes (merges, clock fills) are encoded here.
   */
  #afterTransaction(tr: Y.Transaction): void {
    const origin = tr.origin;
    if (origin === 'load' || this.#broken) {
      // Changed without passing #changed: the kept full state would miss it.
      if (changed(tr)) this.#full = null;
      return;
    }
    if (!changed(tr)) return;
    const sender = origin instanceof Skipped ? origin.conn : isConn(origin) ? origin : null;
    const incoming = this.#incoming;
    // Bytes being applied: sent and saved only once Yjs has applied all of them (#apply).
    if (incoming && incoming.origin === origin) {
      incoming.changed = sender;
      touchedFields(tr, incoming.fields, this.#content);
      return;
    }
    const fields = this.#ownFields;
    fields.clear();
    touchedFields(tr, fields, this.#content);
    this.#changed(
      origin,
      sender,
      Y.encodeStateAsUpdate(this.doc, Y.encodeStateVector(tr.beforeState)),
      undefined,
      fields,
    );
  }

  #changed(
    origin: unknown,
    sender: Conn | null,
    update: Uint8Array,
    frame: Uint8Array | undefined,
    fields: ReadonlySet<string>,
  ): void {
    this.size.grew(update.byteLength);
    this.#keep(update);
    this.#host.changed(
      origin === 'remote' ? this.#remoteEditor : sender && !(origin instanceof Skipped) ? sender.userId : null,
      update,
      fields,
    );
    const out = frame ?? updateFrame(update);
    if (sender) sender.ws.publish(this.#host.key, out);
    else this.#host.publish(out);
    if (origin !== 'remote' && this.#host.peers.size > 0) this.#host.relay(0, update, this.#host.lastEditor());
  }

  /**
   * Applies update bytes that will be sent on as they are (see #afterTransaction). Yjs
   * integrates an update's structs before it reads its delete set, so bytes that decode but fail
   * half-way (a crafted delete set) leave part of themselves in the document: then nothing of
   * them is sent or saved, and the room is discarded (#discard).
   */
  #apply(update: Uint8Array, origin: unknown, frame?: Uint8Array): void {
    this.#incomingFields.clear();
    const incoming: Incoming = { update, frame, origin, changed: undefined, fields: this.#incomingFields };
    this.#incoming = incoming;
    try {
      Y.applyUpdate(this.doc, update, origin);
    } catch (err) {
      if (incoming.changed !== undefined) {
        // The sender hears why (4400) before everyone is told to reconnect (1012).
        if (isConn(origin)) origin.ws.close(CloseCode.BadFrame, 'update failed to apply');
        this.#discard();
      }
      throw err instanceof FrameError ? err : new FrameError('update failed to apply');
    } finally {
      this.#incoming = null;
    }
    if (incoming.changed !== undefined)
      this.#changed(origin, incoming.changed, update, origin === incoming.changed ? frame : undefined, incoming.fields);
  }

  /**
   * The document holds part of an update that failed: it is no longer what any editor has, so
   * nothing more of it is applied, sent or saved, and the room reloads (Room: every socket is
   * told to reconnect).
   */
  #discard(): void {
    if (this.#broken) return;
    this.#broken = true;
    this.#host.broken();
  }

  #onAwareness(changes: { added: number[]; updated: number[]; removed: number[] }, origin: unknown): void {
    if (isConn(origin)) {
      for (const id of changes.added) origin.awarenessIds.add(id);
      for (const id of changes.removed) origin.awarenessIds.delete(id);
    }
    const changed = [...changes.added, ...changes.updated, ...changes.removed];
    const update = awarenessProtocol.encodeAwarenessUpdate(this.awareness, changed);
    const frame = awarenessFrame(update);
    if (isConn(origin)) {
      // Back to the sender too, as y-websocket's own server does: y-websocket's client reconnects when
      // it has heard nothing for 30 s, and its awareness renewal (every 15 s) echoed back is what a
      // lone editor hears. Without it a lone editor was reconnected every 30 s, each time a full resync
      // (up to ~0.5 s of event loop near the document limit).
      origin.ws.send(frame);
      origin.ws.publish(this.#host.key, frame);
    } else this.#host.publish(frame);
    if (origin !== 'remote' && this.#host.peers.size > 0) this.#host.relay(1, update, null);
  }

  /**
   * A joiner with nothing yet (an empty state vector) gets the kept full state and the updates
   * made since, in order, encoded once for all such joiners (see #full); the updates published
   * after it reach its socket after these frames.
   */
  #sendFull(conn: Conn): void {
    let full = this.#full;
    if (!full) full = this.#full = { update: Y.encodeStateAsUpdate(this.doc), since: [], sinceBytes: 0, usedAt: 0 };
    full.usedAt = Date.now();
    conn.ws.send(syncStep2FrameOf(full.update));
    for (const u of full.since) conn.ws.send(updateFrame(u));
  }

  /** Notes a change for the kept full state, or drops it when it is no longer worth keeping. */
  #keep(update: Uint8Array): void {
    const full = this.#full;
    if (!full) return;
    full.since.push(update);
    full.sinceBytes += update.byteLength;
    if (full.sinceBytes > FULL_MAX_SINCE || Date.now() - full.usedAt > FULL_IDLE_MS) this.#full = null;
  }

  /** Relays the whole document and every presence to the room's other processes. */
  sendFullState(): void {
    this.#host.relay(0, Y.encodeStateAsUpdate(this.doc), this.#host.lastEditor());
    const ids = [...this.awareness.getStates().keys()];
    if (ids.length > 0) this.#host.relay(1, awarenessProtocol.encodeAwarenessUpdate(this.awareness, ids), null);
  }
}
