import { auditOn, auditStatement, whoById } from '../editorial/audit.ts';
import * as Y from 'yjs';
import type { Sql } from '../store/db.ts';
import { NotFound } from '../errors.ts';
import { validateData } from '../content/validate.ts';
import { updateRecord, type WriteContext } from '../content/write.ts';
import { WriteTx, type WriteCommitter } from '../content/tx.ts';
import { changedFields, readContent, seedDoc, writeContent, type Content } from './content.ts';
import {
  draftOf,
  draftStatement,
  insertState,
  loadState,
  lockState,
  readDraft,
  writeState,
  writeStateStatement,
} from './store.ts';
import type { RoomInfo } from './room-host.ts';
import { RoomDoc } from './room-doc.ts';
import type { Lease, SaverLocks } from './saver-lock.ts';

/**
 * A room's document at load: its stored state when there is one (then reconciled with writes
 * made to the record since), else a document seeded from the record's working version. The
 * first state is stored at once, so two processes loading the room together share one seed: two
 * seeds made apart would merge into doubled text. `dirty`: the load merged outside writes.
 */
export async function loadDoc(
  info: RoomInfo,
  sql: Sql,
  saver: boolean,
): Promise<{ doc: Y.Doc; base: Content; dirty: boolean }> {
  let stored = await loadState(sql, info.key);
  let doc: Y.Doc;
  let base: Content;
  let dirty = false;
  const draft = await readDraft(sql, info.projectId, info.model.key, info.recordId, info.locale, info.defaultLocale);
  if (draft === null) throw new NotFound('No such record');
  if (!stored) {
    doc = seedDoc(info.model, draft);
    const seed = { state: Y.encodeStateAsUpdate(doc), base: draft };
    // The record may be deleted meanwhile (the foreign key says so).
    const inserted = await insertState(sql, info.key, info.projectId, info.recordId, seed).catch((e) => {
      throw (e as { code?: string }).code === '23503' ? new NotFound('No such record') : e;
    });
    if (!inserted) {
      doc.destroy();
      stored = await loadState(sql, info.key);
    }
  }
  if (stored) {
    doc = new RoomDoc();
    Y.applyUpdate(doc, stored.state, 'load');
    base = stored.base;
    // Writes made while no room was open. Only the saver merges: the same merge made in two
    // processes would insert the same text twice.
    const outside = changedFields(draft, base);
    if (saver && Object.keys(outside).length > 0) {
      writeContent(doc, info.model, outside, 'load');
      base = draft;
      dirty = true;
    }
  } else base = draft;
  return { doc: doc!, base, dirty };
}

/**
 * The fields of a save that the content layer will accept: a value an editor typed that the
 * model refuses (a word in a number field) stays in the room and is left out of the record,
 * instead of failing the whole save; a required field of an unversioned model left empty keeps
 * its saved value.
 */
export function validPatch(info: RoomInfo, patch: Content): Content {
  const out: Content = {};
  // Unversioned records are live: their required fields must stay filled (checkRequired).
  const required = new Set(
    info.model.versioned === false ? info.model.fields.filter((f) => f.required).map((f) => f.key) : [],
  );
  for (const [k, v] of Object.entries(patch)) {
    if (required.has(k) && (v === null || v === '' || (Array.isArray(v) && v.length === 0))) continue;
    try {
      Object.assign(out, validateData(info.model, { [k]: v }, info.models, { partial: true }));
    } catch {
      // left out (see above)
    }
  }
  return out;
}

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
}

/** A save found that this process no longer holds the room's lock: nothing was written. */
class LeaseLost extends Error {}

/** A save found no record (deleted meanwhile): nothing was written. */
class RecordGone extends Error {}

/**
 * How a room persists (the half of the room that talks to PostgreSQL): the debounce, the saver
 * lease, saves into the record (unversioned models) or into the stored state (versioned ones),
 * and the reconciliation with writes made outside the room. Its methods run inside the room's
 * mailbox, in order with the document's updates; the debounce timer goes through `enqueue`.
 */
export class RoomSaver {
  readonly #info: RoomInfo;
  readonly #doc: Y.Doc;
  readonly #host: SaverHost;
  readonly #enqueue: () => void;
  readonly #gone: () => void;
  /** The record content the document was last reconciled with (see sql/012_collab.sql). */
  #base: Content;
  #lease: Lease | null;
  #version = 0;
  #savedVersion = 0;
  #lastEditor: string | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the unsaved changes must be saved at the latest (the `maxWaitMs` cap). */
  #deadline = 0;
  #lastChangeAt = 0;
  #stopped = false;
  /** Saves written into the record, for diagnostics and the bench. */
  saves = 0;
  /** Told the byte size of each state a save encodes (the room's document size, size.ts). */
  encoded: (bytes: number) => void = () => {};

  constructor(
    info: RoomInfo,
    doc: Y.Doc,
    host: SaverHost,
    loaded: { base: Content; lease: Lease | null; dirty: boolean },
    enqueue: () => void,
    gone: () => void,
  ) {
    this.#info = info;
    this.#doc = doc;
    this.#host = host;
    this.#base = loaded.base;
    this.#lease = loaded.lease;
    if (loaded.dirty) this.#version = 1;
    this.#enqueue = enqueue;
    this.#gone = gone;
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

  /** The document changed (by `editor` when known): save it after the debounce. */
  changed(editor?: string | null): void {
    if (editor) this.#lastEditor = editor;
    this.#version++;
    this.#schedule();
  }

  /**
   * Debounce: a save `debounceMs` after the last change, at most `maxWaitMs` after the first.
   * One timer per quiet period, not one per keystroke: when it fires early it re-arms for the rest.
   */
  #schedule(): void {
    if (this.#stopped) return;
    const now = Date.now();
    this.#lastChangeAt = now;
    if (this.#timer !== undefined) return;
    // The cap is spread over its last fifth: rooms that started typing together (a reconnect
    // storm, a bench) do not all save in the same instant.
    this.#deadline = now + this.#host.maxWaitMs * (0.8 + 0.2 * Math.random());
    // The cap may come first (a debounce configured longer than the cap).
    this.#arm(Math.min(this.#host.debounceMs, this.#deadline - now));
  }

  #arm(delay: number): void {
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        if (this.#stopped) return;
        const due = Math.min(this.#lastChangeAt + this.#host.debounceMs, this.#deadline);
        const wait = due - Date.now();
        if (wait > 0) return this.#arm(wait);
        this.#enqueue();
      },
      Math.max(0, delay),
    );
    this.#timer.unref?.();
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
    if (final && this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#stopped || !(await this.#claim())) {
      this.#savedVersion = this.#version;
      return;
    }
    if (this.#version === this.#savedVersion) return;
    try {
      if (this.#info.model.versioned === false) await this.#writeRecord(this.#lastEditor, this.#lease);
      else await this.#storeState();
    } catch (err) {
      if (!(err instanceof LeaseLost)) throw err;
      // Nothing was written: hold the lock again (then save) or leave the room to its new saver.
      this.#lease = null;
      if (await this.#claim()) return this.save(final);
      this.#savedVersion = this.#version;
    }
  }

  /** Versioned models: the live state is kept (compacted), the working version is not touched. */
  async #storeState(): Promise<void> {
    const info = this.#info;
    const lease = this.#lease!;
    const version = this.#version;
    const ok = await this.#host.sql.begin(async (tx) => {
      if (!(await lockState(tx, info.key))) return false;
      if (!(await this.#host.locks.held(tx as never, lease))) throw new LeaseLost();
      const draft = await readDraft(tx, info.projectId, info.model.key, info.recordId, info.locale, info.defaultLocale);
      if (draft === null) return false;
      this.#mergeOutside(draft);
      const state = Y.encodeStateAsUpdate(this.#doc);
      this.encoded(state.byteLength);
      await writeState(tx, info.key, { state, base: this.#base });
      return true;
    });
    if (!ok) return this.#lost();
    this.#host.stats.saves++;
    this.#savedVersion = version;
  }

  /** `saveCollabDraft`: the document into the record's working version, from any process. */
  saveDraft(userId: string | null): Promise<boolean> {
    return this.#writeRecord(userId, null);
  }

  /**
   * Writes the document into the record's working version (and, for unversioned models, the
   * published one) with the content layer's updateRecord, attributed to `userId`. Inside the
   * transaction the record is locked and read first: a write that committed since the last
   * reconciliation is merged into the document before the document is written back. An autosave
   * (`lease` given) commits only while this process still holds the room's lock.
   *
   * Two round trips through the write committer (content/tx.ts): BEGIN with the locked read
   * (and the lock check), then the writes, the stored state, the NOTIFY and COMMIT as one
   * message. As separate queries a save was about ten round trips, and on a loaded 2-core box
   * the client side of those (socket writes and reads) cost the gateway about as much CPU as
   * all the keystrokes it relayed (bench collab profile, session 4).
   */
  async #writeRecord(userId: string | null, lease: Lease | null): Promise<boolean> {
    const info = this.#info;
    const ctx: WriteContext = {
      projectId: info.projectId,
      defaultLocale: info.defaultLocale,
      userId,
      models: info.models,
    };
    const check = lease ? await this.#host.locks.heldCheck(lease) : null;
    if (lease && !check) throw new LeaseLost();
    const tx = new WriteTx({ projectId: info.projectId, userId });
    let wrote = false;
    let base = this.#base;
    let version = this.#version;
    let gone = false;
    tx.prelude = {
      statement: draftStatement(
        info.projectId,
        info.model.key,
        info.recordId,
        info.locale,
        info.defaultLocale,
        check?.expr ?? null,
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
        this.#mergeOutside(draft);
        // Keystrokes go on being applied while this transaction waits (Room.#direct): what is
        // saved is the document as read here, and only this version counts as saved.
        version = this.#version;
        const content = readContent(this.#doc, info.model);
        const patch = validPatch(info, changedFields(content, draft));
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
        }
        base = { ...draft, ...patch };
        const state = Y.encodeStateAsUpdate(this.#doc);
        this.encoded(state.byteLength);
        tx.follow(writeStateStatement(info.key, { state, base }));
      },
    };
    try {
      await this.#host.writes.commit(tx);
    } catch (err) {
      if (gone) {
        this.#lost();
        return false;
      }
      throw err;
    }
    this.#base = base;
    this.#savedVersion = version;
    if (lease) this.#host.stats.saves++;
    if (wrote) this.saves++;
    return wrote;
  }

  /** Merges the difference between the record's working version and `base` into the document. */
  #mergeOutside(draft: Content): void {
    const outside = changedFields(draft, this.#base);
    if (Object.keys(outside).length > 0) writeContent(this.#doc, this.#info.model, outside, 'merge');
    this.#base = draft;
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
    this.#gone();
  }

  /** The room unloads: no more saves from here on (queued ones find nothing to do). */
  halt(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** After the room's last message: the lock goes back. */
  async release(): Promise<void> {
    const lease = this.#lease;
    this.#lease = null;
    if (lease) await this.#host.locks.release(lease).catch(() => {});
  }
}
