import * as Y from 'yjs';
import type { ModelDef } from '../projects/types.ts';
import { RoomDoc } from './room-doc.ts';

/**
 * The shared document's layout (CONTRACT §10): `Y.Map('content')` holds one entry per field key,
 * a `Y.Text` for text and richtext fields holding a string, a plain JSON value otherwise.
 */
export type Content = Record<string, unknown>;

const TEXT_TYPES = new Set(['text', 'richtext']);

/** The name of the root map holding the fields. */
export const CONTENT_MAP = 'content';

export function contentMap(doc: Y.Doc): Y.Map<unknown> {
  return doc.getMap(CONTENT_MAP);
}

/** The record content the document stands for: the model's fields only, Y.Text as strings. */
export function readContent(doc: Y.Doc, model: ModelDef): Content {
  const map = contentMap(doc);
  const out: Content = {};
  for (const f of model.fields) {
    if (!map.has(f.key)) continue;
    const v = map.get(f.key);
    out[f.key] = v instanceof Y.AbstractType ? (v instanceof Y.Text ? v.toString() : v.toJSON()) : v;
  }
  return out;
}

export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a === null || b === null) return false;
  // Two different strings or numbers: no need to serialise them (a save compares every text
  // field this way; JSON.stringify of the texts was 1.5 % of the gateway's CPU in bench collab).
  if (typeof a !== 'object' || typeof b !== 'object') return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Fields whose value in `next` differs from `prev` (a removed field counts, as null). */
export function changedFields(next: Content, prev: Content): Content {
  const out: Content = {};
  for (const [k, v] of Object.entries(next)) if (!sameValue(v, prev[k])) out[k] = v;
  for (const k of Object.keys(prev)) if (!(k in next) && prev[k] !== null && prev[k] !== undefined) out[k] = null;
  return out;
}

/**
 * Writes field values into the document in one transaction. A string into a text field edits
 * the existing Y.Text by its changed middle (common prefix and suffix kept), so a cursor
 * elsewhere in the text stays where it was and concurrent typing merges.
 */
export function writeContent(doc: Y.Doc, model: ModelDef, values: Content, origin: unknown): void {
  const map = contentMap(doc);
  const types = new Map(model.fields.map((f) => [f.key, f.type]));
  doc.transact(() => {
    for (const [key, value] of Object.entries(values)) {
      const type = types.get(key);
      if (!type) continue;
      const current = map.get(key);
      if (TEXT_TYPES.has(type) && typeof value === 'string') {
        if (current instanceof Y.Text) editText(current, value);
        else map.set(key, new Y.Text(value));
      } else if (value === null || value === undefined) {
        if (map.has(key)) map.delete(key);
      } else {
        const now = current instanceof Y.AbstractType ? current.toJSON() : current;
        if (!sameValue(now, value)) map.set(key, value);
      }
    }
  }, origin);
}

function editText(text: Y.Text, next: string): void {
  const prev = text.toString();
  if (prev === next) return;
  let start = 0;
  const max = Math.min(prev.length, next.length);
  while (start < max && prev.charCodeAt(start) === next.charCodeAt(start)) start++;
  let end = 0;
  while (end < max - start && prev.charCodeAt(prev.length - 1 - end) === next.charCodeAt(next.length - 1 - end)) end++;
  const removed = prev.length - start - end;
  if (removed > 0) text.delete(start, removed);
  const inserted = next.slice(start, next.length - end);
  if (inserted.length > 0) text.insert(start, inserted);
}

/** A fresh document seeded with a record's content. */
export function seedDoc(model: ModelDef, content: Content): Y.Doc {
  const doc = new RoomDoc();
  writeContent(doc, model, content, 'seed');
  return doc;
}

/**
 * The field keys a transaction touched: entries of the content map set or deleted, and the
 * fields that contain a changed nested type (a Y.Text typed into, a Y.Map inside a field). Keys
 * of other root types are no fields. `content`: the document's content map, when the caller
 * holds it (per keystroke, the lookup is a good part of the walk).
 */
export function touchedFields(
  tr: Y.Transaction,
  into: Set<string>,
  content: Y.Map<unknown> = contentMap(tr.doc),
): void {
  const map = content as unknown as Y.AbstractType<Y.YEvent<any>>;
  for (const [type, keys] of tr.changed) {
    if (type === map) {
      for (const k of keys) if (k !== null) into.add(k);
      continue;
    }
    let t = type;
    while (t._item !== null && t._item.parent !== map) t = t._item.parent as Y.AbstractType<Y.YEvent<any>>;
    if (t._item !== null && t._item.parentSub !== null) into.add(t._item.parentSub);
  }
}
