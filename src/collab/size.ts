import * as Y from 'yjs';
import { CONTENT_MAP } from './content.ts';
import { CloseCode, FrameError, type DecodedUpdate } from './protocol.ts';
import { NOWHERE, OUTSIDE, UNKNOWN, placeResolver } from './guard.ts';

/**
 * Size limits of a room's document (no I/O). The 2 MiB frame cap bounds one update, not what
 * updates add up to: six frames of 1.8 MiB grew one text field to 10.9 MiB, and its save held the
 * event loop for a second (issue 27 item 9). So every update from an editor is measured before
 * it is applied — what it adds to each field and to the document — and refused as a whole (the
 * socket closed with 4413 and the reason) when a field or the document would pass its limit.
 * Updates that only delete are never refused: they are how an editor gets back under a limit.
 */
export interface SizeLimits {
  /** Characters (UTF-16 code units) of one field: a Y.Text's length, the JSON of another value. */
  maxFieldChars: number;
  /** Bytes of the document's Yjs state (what is stored, sent to a joining editor, encoded per save). */
  maxDocBytes: number;
}

export const SIZE_LIMITS: SizeLimits = { maxFieldChars: 1_000_000, maxDocBytes: 4 * 1024 * 1024 };

/** An update that would take a field or the document past its limit: close with 4413. */
export class TooLargeError extends FrameError {
  override readonly code = CloseCode.TooLarge;
}

function jsonChars(v: unknown): number {
  try {
    return JSON.stringify(v)?.length ?? 0;
  } catch {
    // Nested past JSON.stringify's stack: certainly large.
    return Number.MAX_SAFE_INTEGER;
  }
}

/** Characters an item's content adds (its length in a Y.Text; JSON characters otherwise). */
function contentChars(item: Y.Item): number {
  const c = item.content as unknown;
  if (c instanceof Y.ContentString) return c.str.length;
  if (c instanceof Y.ContentDeleted) return 0;
  if (c instanceof Y.ContentAny) return jsonChars(c.arr);
  if (c instanceof Y.ContentJSON) return jsonChars(c.arr);
  if (c instanceof Y.ContentBinary) return c.content.byteLength;
  if (c instanceof Y.ContentEmbed) return jsonChars(c.embed);
  if (c instanceof Y.ContentFormat) return c.key.length + jsonChars(c.value);
  // A nested type or sub-document: its own content comes as further items.
  return 1;
}

/** A field's size now: a Y.Text's length (O(1)), else the JSON of its value. */
function fieldChars(map: Y.Map<unknown>, key: string): number {
  if (!map.has(key)) return 0;
  const v = map.get(key);
  if (v instanceof Y.Text) return v.length;
  if (v instanceof Y.AbstractType) return jsonChars(v.toJSON());
  return jsonChars(v);
}

/**
 * The field an update would take past `maxFieldChars`, or null. A field's new size is its size
 * now plus what the update adds to it; an update that sets the field itself (a map entry of the
 * content map) replaces the old value, so counts alone.
 */
export function oversizedField(
  doc: Y.Doc,
  decoded: DecodedUpdate,
  limits: SizeLimits,
): { field: string; chars: number } | null {
  const { fresh, freshPlace } = placeResolver(doc, decoded);
  const added = new Map<string, number>();
  const replaced = new Set<string>();
  for (const list of fresh.values()) {
    for (const s of list) {
      if (!(s instanceof Y.Item)) continue;
      const n = contentChars(s);
      if (n === 0) continue;
      const place = freshPlace(s);
      if (place === NOWHERE || place === OUTSIDE || place === UNKNOWN) continue;
      if ((s.parent as unknown) === CONTENT_MAP && s.parentSub === place) replaced.add(place);
      added.set(place, (added.get(place) ?? 0) + n);
    }
  }
  if (added.size === 0) return null;
  const map = doc.getMap(CONTENT_MAP);
  for (const [field, n] of added) {
    const chars = (replaced.has(field) ? 0 : fieldChars(map, field)) + n;
    if (chars > limits.maxFieldChars) return { field, chars };
  }
  return null;
}

/**
 * The document's size in bytes of Yjs state, kept as an upper bound without encoding the state
 * per update: the stored document's bytes when the room loads (its compacted state is exact, and
 * an update adds at most about its own size), exact again whenever a compaction encodes the
 * stored document (compactor-worker.ts: its size plus what the room applied since the save it
 * covers), plus the bytes of every update applied. Past the limit it is measured here (long
 * editing sessions overcount what deletions freed), at most once per eighth of the limit applied
 * since, so a client near the limit cannot make the room encode its whole document per frame.
 */
export class DocSize {
  #bytes: number;
  #since = 0;
  /** Bytes of every update applied since the room loaded (a clock for `settled`). */
  #total = 0;
  readonly #doc: Y.Doc;
  readonly #limits: SizeLimits;

  /** `bytes`: an upper bound known at load; measured here when not given. */
  constructor(doc: Y.Doc, limits: SizeLimits, bytes?: number) {
    this.#doc = doc;
    this.#limits = limits;
    this.#bytes = bytes ?? Y.encodeStateAsUpdate(doc).byteLength;
    if (bytes === undefined) this.measuredAt = Date.now();
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** The clock `settled` takes: bytes applied so far. */
  get total(): number {
    return this.#total;
  }

  /** The state was encoded: its exact size. */
  measured(bytes: number): void {
    this.#bytes = bytes;
    this.#since = 0;
    this.measuredAt = Date.now();
  }

  /**
   * The document as it was at clock `at` (`total` then) measured `bytes`; what was applied since
   * is added back. It may raise the bound: an update can add more than its own bytes (inserts
   * into the middle of long items split them; a fill of 2.98 MB of such updates made a 4.15 MB
   * state), which is why a room near the limit has its size measured this way regularly.
   */
  settled(bytes: number, at: number): void {
    const now = bytes + Math.max(0, this.#total - at);
    this.measured(now);
  }

  /** When the size was last measured exactly (ms since the epoch; 0: never, a bound from the load). */
  measuredAt = 0;

  /** An update was applied. */
  grew(bytes: number): void {
    this.#bytes += bytes;
    this.#since += bytes;
    this.#total += bytes;
  }

  /** Whether `bytes` more would pass the limit. */
  wouldPass(bytes: number): boolean {
    if (this.#bytes + bytes <= this.#limits.maxDocBytes) return false;
    if (this.#since >= this.#limits.maxDocBytes / 8) this.measured(Y.encodeStateAsUpdate(this.#doc).byteLength);
    return this.#bytes + bytes > this.#limits.maxDocBytes;
  }
}

/** Refuses (TooLargeError) an editor's update that a field or the document could not hold. */
export function checkSize(
  doc: Y.Doc,
  size: DocSize,
  update: Uint8Array,
  decoded: DecodedUpdate,
  limits: SizeLimits,
): void {
  // No field holds more characters than five times the document's bytes (text is at least a
  // byte a character in the state; a JSON `null`, one byte there, is four characters and a
  // comma): in a document that small no field can pass, and keystrokes skip the walk.
  const field =
    5 * (size.bytes + update.byteLength) > limits.maxFieldChars ? oversizedField(doc, decoded, limits) : null;
  if (field)
    throw new TooLargeError(
      `Field "${field.field.slice(0, 100)}" would hold ${field.chars} characters; at most ${limits.maxFieldChars} are allowed`,
    );
  // Only updates that add content can grow the document past its limit in a way worth refusing.
  if (size.wouldPass(update.byteLength) && addsContent(decoded)) {
    throw new TooLargeError(`The document would exceed ${limits.maxDocBytes} bytes`);
  }
}

function addsContent(decoded: DecodedUpdate): boolean {
  for (const s of decoded.structs) if (s instanceof Y.Item && !(s.content instanceof Y.ContentDeleted)) return true;
  return false;
}
