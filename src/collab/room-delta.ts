import * as Y from 'yjs';
import type { ModelDef } from '../projects/types.ts';
import { contentMap, sameValue, type Content } from './content.ts';

/**
 * What a save appends and what it reads (issue 27 item 9): the room's updates since its last save
 * and the fields they touched. Encoding a document near the 4 MiB limit whole took 180–360 ms of
 * the event loop per save, and reading every field back 40–90 ms (a heavily edited document,
 * bench/collab-big-type.ts); the updates since the last save are a few hundred bytes while
 * someone types, and the field being typed into is all that needs reading.
 */

/** Updates kept past this many bytes are dropped: the next save encodes its delta instead. */
const MAX_PENDING_BYTES = 16 * 1024 * 1024;

/** A save's delta: the updates to append and the document's state vector with them in it. */
export interface Cut {
  updates: Uint8Array[];
  sv: Uint8Array;
}

export class DeltaTracker {
  #pending: Uint8Array[];
  #pendingBytes = 0;
  /**
   * Whether #pending holds every update the document received since what is stored. Not after a
   * failed save, nor while another process saves (this one keeps no updates then), nor past
   * MAX_PENDING_BYTES: the next delta is then the document encoded against a state vector the
   * stored document covers (`cut`), a walk of the whole document, once.
   */
  #continuous: boolean;
  /** A state vector the stored document is known to cover: the last save's, or the load's. */
  #durable: Uint8Array;
  #dirty: Set<string>;
  /** Log rows and their bytes stored after the compacted state, as far as this process knows. */
  rows: number;
  bytes: number;

  constructor(loaded: {
    /** The state vector of the document as stored (before any merge at load). */
    sv: Uint8Array;
    /** Updates made at load (a merge of outside writes), not stored yet; null: not tracking. */
    pending: Uint8Array[] | null;
    rows: number;
    bytes: number;
    /** Every field: the first save after a load reads them all. */
    fields: Iterable<string>;
  }) {
    this.#durable = loaded.sv;
    this.#pending = loaded.pending ?? [];
    this.#continuous = loaded.pending !== null;
    for (const u of this.#pending) this.#pendingBytes += u.byteLength;
    this.rows = loaded.rows;
    this.bytes = loaded.bytes;
    this.#dirty = new Set(loaded.fields);
  }

  /** The document received `update`, touching `fields`; `saving`: this process saves the room. */
  record(update: Uint8Array, fields: ReadonlySet<string>, saving: boolean): void {
    for (const f of fields) this.#dirty.add(f);
    if (!this.#continuous) return;
    if (!saving) {
      this.#drop();
      return;
    }
    this.#pending.push(update);
    this.#pendingBytes += update.byteLength;
    if (this.#pendingBytes > MAX_PENDING_BYTES) this.#drop();
  }

  #drop(): void {
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#continuous = false;
  }

  /** The fields touched since they were last taken (every field with `all`); see `untake`. */
  takeDirty(all?: Iterable<string>): Set<string> {
    const taken = this.#dirty;
    this.#dirty = new Set();
    if (all) for (const f of all) taken.add(f);
    return taken;
  }

  /** A save that read `fields` did not commit: they are read again by the next one. */
  untake(fields: Iterable<string>): void {
    for (const f of fields) this.#dirty.add(f);
  }

  /**
   * The delta to append now, and the state vector it brings the stored document to. `stored`: the
   * newest state vector the stored document covers, read in the save's transaction (another
   * process may have saved since this one's `durable`). Call `committed` or `failed` after.
   */
  cut(doc: Y.Doc, stored: Uint8Array | null): Cut {
    const sv = Y.encodeStateVector(doc);
    const updates = this.#continuous ? this.#pending : [Y.encodeStateAsUpdate(doc, stored ?? this.#durable)];
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#continuous = true;
    return { updates, sv };
  }

  committed(cut: Cut): void {
    this.#durable = cut.sv;
    if (cut.updates.length === 0) return;
    this.rows++;
    for (const u of cut.updates) this.bytes += u.byteLength;
  }

  /** The cut's updates may not be stored: the next delta is encoded against `durable`. */
  failed(): void {
    this.#drop();
  }

  /** A process that stands by keeps no updates: a takeover encodes its first delta. */
  standBy(): void {
    this.#drop();
  }

  /** A compaction merged `rows` rows of `bytes`. */
  compacted(rows: number, bytes: number): void {
    this.rows = Math.max(0, this.rows - rows);
    this.bytes = Math.max(0, this.bytes - bytes);
  }
}

/** How long a slice of a field read may hold the event loop (ms). */
const SLICE_MS = 4;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The read stopped: the room was stopped or discarded meanwhile. */
export class ReadAborted extends Error {}

/**
 * The values of `fields` (the model's fields only; Y.Text as strings), as `readContent` reads
 * them, but a long text is read in slices of SLICE_MS with the event loop free between them: a
 * field of 1,000,000 characters in ~100,000 items took 40–45 ms to read in one go. The document
 * must not change meanwhile: the room holds its frames while this runs (Room.hold). `alive()`
 * false between slices aborts (ReadAborted).
 */
export async function readFields(
  doc: Y.Doc,
  model: ModelDef,
  fields: ReadonlySet<string>,
  alive: () => boolean,
): Promise<Content> {
  const map = contentMap(doc);
  const out: Content = {};
  let sliceStart = performance.now();
  for (const f of model.fields) {
    if (!fields.has(f.key) || !map.has(f.key)) continue;
    const v = map.get(f.key);
    if (!(v instanceof Y.Text)) {
      out[f.key] = v instanceof Y.AbstractType ? v.toJSON() : v;
      continue;
    }
    // Y.Text.toString, resumable: the item list walked in order, live string content kept.
    const parts: string[] = [];
    let n = v._start;
    let i = 0;
    while (n !== null) {
      if (!n.deleted && n.countable && n.content instanceof Y.ContentString) parts.push(n.content.str);
      n = n.right;
      if (++i % 512 === 0 && performance.now() - sliceStart > SLICE_MS) {
        await nextTurn();
        if (!alive()) throw new ReadAborted('room stopped');
        sliceStart = performance.now();
      }
    }
    out[f.key] = parts.join('');
  }
  return out;
}

/** The fields of `read` among `fields` whose value differs from `draft`'s (absent counts as null). */
export function changedOf(read: Content, draft: Content, fields: Iterable<string>): Content {
  const out: Content = {};
  for (const k of fields) {
    const next = read[k] ?? null;
    const prev = draft[k] ?? null;
    if (!sameValue(next, prev)) out[k] = next;
  }
  return out;
}
