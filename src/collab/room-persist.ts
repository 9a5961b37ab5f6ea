import { auditOn, auditStatement, whoById } from '../editorial/audit.ts';
import type * as Y from 'yjs';
import type { Sql } from '../store/db.ts';
import { updateRecord, type WriteContext } from '../content/write.ts';
import { WriteTx, type WriteCommitter } from '../content/tx.ts';
import { changedFields, writeContent, type Content } from './content.ts';
import { draftOf, draftStatement, readDraft } from './store.ts';
import { append, appendStatement, durableSvSql, lockState, type RecordLocale } from './log-store.ts';
import type { RoomInfo } from './room-host.ts';
import { DeltaTracker, ReadAborted, changedOf, readFields, type Cut } from './room-delta.ts';
import { validPatch, type LoadedDoc } from './room-load.ts';
import type { Lease, SaverLocks } from './saver-lock.ts';
import type { Compactor } from './compactor.ts';
import { SIZE_LIMITS } from './size.ts';
import { SaveTimer } from './save-timer.ts';

export { loadDoc, validPatch } from './room-load.ts';

/** What a room's persistence needs of its process. */
export interface SaverHost {
  sql: Sql;
  locks: SaverLocks;
  debounceMs: number;
  maxWaitMs: number;
  /** The content layer's write transactions (saves into the record go through it). */
  writes: WriteCommitter;
  /** Counters of the process (GET /metrics): save transactions committed by autosaves. */
  stats: { saves: number; refused: number };
  /** Merges rooms' stored logs into their states off the event loop (compactor.ts). */
  compactor: Compactor | null;
  /** A room's log is compacted past this many rows or bytes. */
  compactRows: number;
  compactBytes: number;
}

/** What a saver needs of its room. */
export interface SaverRoom {
  /** A save is due (the debounce fired): queue it in the room's mailbox. */
  enqueue(): void;
  /** The record is gone. */
  gone(): void;
  /** Holds the document still (frames wait) until the returned function is called. */
  hold(): () => void;
  /** The document's size (size.ts DocSize): its bound and clock, and an exact measure from a compaction. */
  size: {
    readonly bytes: number;
    readonly total: number;
    readonly measuredAt: number;
    settled(bytes: number, at: number): void;
  };
}

/** A room past this share of the document limit has its size measured by a compaction… */
const NEAR_LIMIT = 0.75;
/** …at least this often (ms). */
const NEAR_LIMIT_MS = 30_000;

/** A save found that this process no longer holds the room's lock: nothing was written. */
class LeaseLost extends Error {}

/** A save found no record (deleted meanwhile): nothing was written. */
class RecordGone extends Error {}

/**
 * How a room persists (the half of the room that talks to PostgreSQL): the debounce, the saver
 * lease, saves into the record (unversioned models) and the room's stored document, and the
 * reconciliation with writes made outside the room. A save appends the updates since the last
 * one to collab_log (room-delta.ts) rather than the whole state; the log is merged into the
 * state off the event loop once it passes `compactRows` / `compactBytes` (compactor.ts). Its
 * methods run inside the room's mailbox, in order with the document's updates; the debounce
 * timer goes through `enqueue`.
 */
export class RoomSaver {
  readonly #info: RoomInfo;
  readonly #doc: Y.Doc;
  readonly #host: SaverHost;
  readonly #room: SaverRoom;
  /** The record content the document was last reconciled with (see sql/012_collab.sql). */
  #base: Content;
  /** The base as stored in collab_state (a save stores the base only when `#base` is another). */
  #storedBase: Content;
  /** Where the stored base is read from (log-store.ts Append.rebase). */
  readonly #record: RecordLocale;
  #lease: Lease | null;
  readonly #tracker: DeltaTracker;
  #version = 0;
  #savedVersion = 0;
  #lastEditor: string | null = null;
  readonly #timer: SaveTimer;
  #stopped = false;
  /** Saves written into the record, for diagnostics and the bench. */
  saves = 0;

  constructor(info: RoomInfo, host: SaverHost, loaded: LoadedDoc & { lease: Lease | null }, room: SaverRoom) {
    this.#info = info;
    this.#doc = loaded.doc;
    this.#host = host;
    this.#room = room;
    this.#base = loaded.base;
    this.#storedBase = loaded.dirty ? {} : loaded.base;
    this.#record = { recordId: info.recordId, locale: info.locale, defaultLocale: info.defaultLocale };
    this.#lease = loaded.lease;
    this.#tracker = new DeltaTracker({
      sv: loaded.sv,
      pending: loaded.lease ? loaded.merged : null,
      rows: loaded.rows,
      bytes: loaded.logBytes,
      fields: info.model.fields.map((f) => f.key),
    });
    if (loaded.dirty) this.#version = 1;
    this.#timer = new SaveTimer(host.debounceMs, host.maxWaitMs, () => room.enqueue());
  }

  get isSaver(): boolean {
    return this.#host.locks.valid(this.#lease);
  }

  get lastEditor(): string | null {
    return this.#lastEditor;
  }

  /** Edits this process must still save (a process that does not save has none). */
  get unsaved(): boolean {
    return this.isSaver && this.#version !== this.#savedVersion;
  }

  /** The document changed by `update` (by `editor` when known): save it after the debounce. */
  changed(editor: string | null, update: Uint8Array, fields: ReadonlySet<string>): void {
    if (editor) this.#lastEditor = editor;
    this.#tracker.record(update, fields, this.isSaver);
    this.#version++;
    this.#timer.changed();
  }

  /** One process saves a room: the holder of its advisory lock. The others stand by. */
  async #claim(): Promise<boolean> {
    if (!this.isSaver && !this.#stopped) this.#lease = await this.#host.locks.acquire(this.#info.key);
    return this.isSaver;
  }

  /**
   * The lock session was lost: this process saves nothing more until it holds the lock again.
   * It tries at once; when another process took the room over, that one saves (it has every
   * edit: the room's processes share them).
   */
  async relock(): Promise<void> {
    this.#lease = null;
    await this.save(false);
  }

  async save(final: boolean): Promise<void> {
    if (final) this.#timer.cancel();
    if (this.#stopped || !(await this.#claim())) return this.#standBy();
    if (this.#version === this.#savedVersion) return;
    try {
      if (this.#info.model.versioned === false) await this.#writeRecord(this.#lastEditor, this.#lease, false);
      else await this.#storeState();
    } catch (err) {
      if (err instanceof ReadAborted) return;
      if (!(err instanceof LeaseLost)) throw err;
      // Nothing was written: hold the lock again (then save) or leave the room to its new saver.
      this.#lease = null;
      if (await this.#claim()) return this.save(final);
      this.#standBy();
    }
  }

  /** Another process saves the room (it has every edit): nothing is owed from here. */
  #standBy(): void {
    this.#savedVersion = this.#version;
    this.#tracker.standBy();
  }

  /** Versioned models: the live document is stored (its delta), the working version is not touched. */
  async #storeState(): Promise<void> {
    const info = this.#info;
    const lease = this.#lease!;
    let version = this.#version;
    let cut: Cut | undefined;
    let base: Content | null = null;
    let at = 0;
    let ok: boolean;
    try {
      ok = await this.#host.sql.begin(async (tx) => {
        // The record row first, then the stored state: the order of a record write's save
        // (writeRecord), so the two never deadlock.
        const i = info;
        const draft = await readDraft(tx, i.projectId, i.model.key, i.recordId, i.locale, i.defaultLocale, true);
        if (draft === null) return false;
        const stored = await lockState(tx, info.key);
        if (!stored) return false;
        if (!(await this.#host.locks.held(tx as never, lease))) throw new LeaseLost();
        this.#mergeOutside(draft);
        // Synchronous from here to the append: what is stored is the document as it is now.
        version = this.#version;
        at = this.#room.size.total;
        cut = this.#tracker.cut(this.#doc, stored.sv);
        base = this.#base !== this.#storedBase ? this.#base : null;
        await append(tx, info.key, { ...cut, rebase: base ? this.#record : null });
        return true;
      });
    } catch (err) {
      if (cut) this.#tracker.failed();
      throw err;
    }
    if (!ok) {
      if (cut) this.#tracker.failed();
      return this.#lost();
    }
    this.#committed(cut!, base, version, at);
    this.#host.stats.saves++;
  }

  /** `saveCollabDraft`: the document into the record's working version, from any process. */
  saveDraft(userId: string | null): Promise<boolean> {
    return this.#writeRecord(userId, null, true);
  }

  /**
   * Writes the document into the record's working version (and, for unversioned models, the
   * published one) with the content layer's updateRecord, attributed to `userId`, and appends
   * the document's delta to the room's log in the same transaction. An autosave (`lease` given)
   * commits only while this process still holds the room's lock.
   *
   * First the fields touched since the last save (`all`: every field) are read with the document
   * held still, a long text in slices with the event loop free between them (room-delta.ts
   * readFields). Then two round trips through the write committer (content/tx.ts): BEGIN with
   * the record locked and read (and the lock check), then the writes, the log row, the NOTIFY and
   * COMMIT as one message. A field written outside the room since the last reconciliation is
   * merged into the document there and left out of this save's patch (the document holds the
   * merge; the next save compares it again).
   */
  async #writeRecord(userId: string | null, lease: Lease | null, all: boolean): Promise<boolean> {
    const info = this.#info;
    const ctx: WriteContext = {
      projectId: info.projectId,
      defaultLocale: info.defaultLocale,
      userId,
      models: info.models,
    };
    const check = lease ? await this.#host.locks.heldCheck(lease) : null;
    if (lease && !check) throw new LeaseLost();
    const fields = this.#tracker.takeDirty(all ? info.model.fields.map((f) => f.key) : undefined);
    let read: Content;
    // What the read covers: later edits stay unsaved for the record (their delta is stored).
    let version: number;
    const release = this.#room.hold();
    try {
      read = await readFields(this.#doc, info.model, fields, () => !this.#stopped);
      version = this.#version;
    } catch (err) {
      this.#tracker.untake(fields);
      throw err;
    } finally {
      release();
    }
    const tx = new WriteTx({ projectId: info.projectId, userId });
    let wrote = false;
    let base = this.#base;
    let stored: Content | null = null;
    let cut: Cut | undefined;
    let at = 0;
    let gone = false;
    tx.prelude = {
      statement: draftStatement(
        info.projectId,
        info.model.key,
        info.recordId,
        info.locale,
        info.defaultLocale,
        check?.expr ?? null,
        info.key,
        durableSvSql,
      ),
      // biome-ignore lint/suspicious/noThenProperty: a prelude is a plain record read by content/tx.ts, never awaited; `then` is its continuation
      then: (rows) => {
        const draft = draftOf(rows, info.locale, info.defaultLocale);
        if (draft === null) {
          gone = true;
          throw new RecordGone();
        }
        const held = rows[0]!.held;
        if (check && !check.confirm(held === true || held === 't')) throw new LeaseLost();
        const outside = this.#mergeOutside(draft);
        const mine = [...fields].filter((k) => !(k in outside));
        const patch = validPatch(info, changedOf(read, draft, mine));
        if (Object.keys(patch).length > 0) {
          tx.write(updateRecord(ctx, info.model, info.recordId, info.locale, patch));
          // The audit log, in the save's transaction (docs/audit.md): the editor, the room.
          if (auditOn())
            tx.follow(
              auditStatement(
                { projectId: info.projectId, tenantId: null },
                whoById(userId),
                { requestId: null, ip: null, userAgent: 'svc collab' },
                [{ action: lease ? 'record.autosaved' : 'record.saved', kind: 'record', id: info.recordId }],
              ),
            );
          wrote = true;
          base = { ...this.#base, ...patch };
        } else base = this.#base;
        // Synchronous from here to the statement: the delta is the document as it is now.
        const sv = rows[0]!.sv;
        at = this.#room.size.total;
        cut = this.#tracker.cut(this.#doc, typeof sv === 'string' ? new Uint8Array(Buffer.from(sv, 'base64')) : null);
        stored = base !== this.#storedBase ? base : null;
        if (cut.updates.length > 0 || stored)
          tx.follow(appendStatement(info.key, { ...cut, rebase: stored ? this.#record : null }));
      },
    };
    try {
      await this.#host.writes.commit(tx);
    } catch (err) {
      this.#tracker.untake(fields);
      if (cut) this.#tracker.failed();
      if (gone) {
        this.#lost();
        return false;
      }
      throw err;
    }
    this.#base = base;
    this.#committed(cut!, stored, version, at);
    if (lease) this.#host.stats.saves++;
    if (wrote) this.saves++;
    return wrote;
  }

  /** A save committed: its delta and base are stored; the log may be due for compaction. */
  #committed(cut: Cut, base: Content | null, version: number, at: number): void {
    this.#tracker.committed(cut);
    if (base) this.#storedBase = base;
    this.#savedVersion = version;
    this.#compact(at);
  }

  /**
   * Past `compactRows` / `compactBytes` of log, the compactor merges it into the state (a worker:
   * compactor.ts). Its exact size of the stored document (as of the save at clock `at`, or later)
   * resets the room's size bound (size.ts), so a room near the document limit is compacted at
   * least every NEAR_LIMIT_MS as well: the bound only estimates what updates add. A compaction
   * skipped (stuck or dead worker) is tried again after a later save; one another process won,
   * or found nothing to merge, restarts the count.
   */
  #compact(at: number): void {
    const t = this.#tracker;
    const compactor = this.#host.compactor;
    const size = this.#room.size;
    const due =
      t.rows >= this.#host.compactRows ||
      t.bytes >= this.#host.compactBytes ||
      (size.bytes > NEAR_LIMIT * SIZE_LIMITS.maxDocBytes && Date.now() - size.measuredAt > NEAR_LIMIT_MS);
    if (!compactor || !due || compactor.busy(this.#info.key)) return;
    void compactor.compact(this.#info.key).then((r) => {
      if (!r || this.#stopped) return;
      if (!r.won) return t.compacted(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
      t.compacted(r.merged, r.mergedBytes);
      this.#room.size.settled(r.bytes, at);
    });
  }

  /** Merges the difference between the record's working version and `base` into the document. */
  #mergeOutside(draft: Content): Content {
    const outside = changedFields(draft, this.#base);
    if (Object.keys(outside).length > 0) {
      writeContent(this.#doc, this.#info.model, outside, 'merge');
      this.#base = draft;
    }
    return outside;
  }

  /** A record write committed elsewhere (GraphQL, CLI): the saver merges it into the document. */
  async merge(): Promise<void> {
    if (!this.isSaver || this.#stopped) return;
    const i = this.#info;
    const draft = await readDraft(this.#host.sql, i.projectId, i.model.key, i.recordId, i.locale, i.defaultLocale);
    if (draft === null) return this.#lost();
    this.#mergeOutside(draft);
  }

  /** The record is gone: nothing is left to save. */
  #lost(): void {
    this.#savedVersion = this.#version;
    this.#room.gone();
  }

  /** The room unloads: no more saves from here on (queued ones find nothing to do). */
  halt(): void {
    this.#stopped = true;
    this.#timer.stop();
  }

  /** After the room's last message: the lock goes back. */
  async release(): Promise<void> {
    const lease = this.#lease;
    this.#lease = null;
    if (lease) await this.#host.locks.release(lease).catch(() => {});
  }
}
