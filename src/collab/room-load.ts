import * as Y from 'yjs';
import type { Sql } from '../store/db.ts';
import { NotFound } from '../errors.ts';
import { validateData } from '../content/validate.ts';
import { changedFields, seedDoc, writeContent, type Content } from './content.ts';
import { readDraft } from './store.ts';
import { insertState, loadStored } from './log-store.ts';
import type { RoomInfo } from './room-host.ts';
import { RoomDoc } from './room-doc.ts';

/** A room's document as loaded, and what its saver needs to know of the stored one. */
export interface LoadedDoc {
  doc: Y.Doc;
  /** The record content the document is reconciled with. */
  base: Content;
  /** The load merged outside writes: what is stored (the base at least) is behind. */
  dirty: boolean;
  /** The state vector of the stored document (before the merge). */
  sv: Uint8Array;
  /** The merge's update (not stored yet), when there was one. */
  merged: Uint8Array[];
  /** Log rows after the stored state, and their bytes. */
  rows: number;
  logBytes: number;
  /** An upper bound of the document's size in bytes (size.ts DocSize). */
  bytes: number;
}

/**
 * A room's document at load: its stored state and log when there are (then reconciled with writes
 * made to the record since), else a document seeded from the record's working version. The
 * first state is stored at once, so two processes loading the room together share one seed: two
 * seeds made apart would merge into doubled text.
 */
export async function loadDoc(info: RoomInfo, sql: Sql, saver: boolean): Promise<LoadedDoc> {
  let stored = await loadStored(sql, info.key);
  const draft = await readDraft(sql, info.projectId, info.model.key, info.recordId, info.locale, info.defaultLocale);
  if (draft === null) throw new NotFound('No such record');
  if (!stored) {
    const doc = seedDoc(info.model, draft);
    const state = Y.encodeStateAsUpdate(doc);
    const sv = Y.encodeStateVector(doc);
    // The record may be deleted meanwhile (the foreign key says so).
    const inserted = await insertState(sql, info.key, info.projectId, info.recordId, { state, sv, base: draft }).catch(
      (e) => {
        throw (e as { code?: string }).code === '23503' ? new NotFound('No such record') : e;
      },
    );
    if (inserted) {
      return { doc, base: draft, dirty: false, sv, merged: [], rows: 0, logBytes: 0, bytes: state.byteLength };
    }
    doc.destroy();
    stored = await loadStored(sql, info.key);
    if (!stored) throw new NotFound('No such record');
  }
  const doc = new RoomDoc();
  Y.applyUpdate(doc, stored.state, 'load');
  let bytes = stored.state.byteLength;
  for (const u of stored.updates) {
    Y.applyUpdate(doc, u, 'load');
    bytes += u.byteLength;
  }
  const sv = Y.encodeStateVector(doc);
  let base = stored.base;
  let dirty = false;
  const merged: Uint8Array[] = [];
  // Writes made while no room was open. Only the saver merges: the same merge made in two
  // processes would insert the same text twice.
  const outside = changedFields(draft, base);
  if (saver && Object.keys(outside).length > 0) {
    const keep = (u: Uint8Array) => merged.push(u);
    doc.on('update', keep);
    writeContent(doc, info.model, outside, 'load');
    doc.off('update', keep);
    for (const u of merged) bytes += u.byteLength;
    base = draft;
    dirty = true;
  }
  return {
    doc,
    base,
    dirty,
    sv,
    merged,
    rows: stored.seqs.length,
    logBytes: stored.logBytes,
    bytes,
  };
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
