import * as Y from 'yjs';
import type { Sql } from '../store/db.ts';
import { NotFound } from '../errors.ts';
import { validateData } from '../content/validate.ts';
import { changedFields, seedDoc, writeContent, type Content } from './content.ts';
import { insertState, loadState, readDraft } from './store.ts';
import type { RoomInfo } from './room-host.ts';

/**
 * A room's document at load: its stored state when there is one (then reconciled with writes
 * made to the record since), else a document seeded from the record's working version. The
 * first state is stored at once, so two processes loading the room together share one seed: two
 * seeds made apart would merge into doubled text. `dirty`: the load merged outside writes.
 */
export async function loadDoc(info: RoomInfo, sql: Sql, saver: boolean): Promise<{ doc: Y.Doc; base: Content; dirty: boolean }> {
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
    doc = new Y.Doc();
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
  const required = new Set(info.model.versioned === false ? info.model.fields.filter((f) => f.required).map((f) => f.key) : []);
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
