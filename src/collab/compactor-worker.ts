/**
 * The compactor thread (src/collab/compactor.ts starts it as a Worker): merges a room's stored
 * state and its log rows into a new state, on a connection of its own, so neither the multi-MiB
 * reads and writes nor the merge touch the event loop. A heavily edited document near the 4 MiB
 * limit takes ~0.5 s to encode and seconds to load into a Y.Doc (bench/collab-big-type.ts,
 * `edits`); the rooms' thread does neither for a compaction.
 *
 * The merge loads the state and the updates into a Y.Doc and encodes it (y-redis' worker does the
 * same): Y.mergeUpdates would be cheaper but keeps deleted text, which a document's garbage
 * collection drops, so a merged log would grow with every deletion ever typed.
 *
 * Lower scheduling priority (nice 10, this thread only), as the password hasher: when the box is
 * busy the request thread wins the CPU.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import * as Y from 'yjs';
import { connect, type Sql } from '../store/db.ts';
import { commitCompaction, loadStored } from './log-store.ts';

declare const self: Worker;

export interface CompactJob {
  id: number;
  url: string;
  room: string;
}

/** A compaction's outcome; `won: false` when another compaction changed the state first. */
export interface CompactResult {
  won: boolean;
  /** Bytes of the new state (the document's exact size at the rows read). */
  bytes: number;
  /** Log rows merged and deleted, and their bytes. */
  merged: number;
  mergedBytes: number;
}

export type CompactReply = { id: number; result: CompactResult | null } | { id: number; error: string };

try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  if (Number.isInteger(tid) && tid > 0) setPriority(tid, 10);
} catch {
  // not Linux, or no /proc: normal priority
}

let sql: Sql | undefined;

async function compact(url: string, room: string): Promise<CompactResult | null> {
  sql ??= connect(url, { max: 1, pool: 'collab-compactor' });
  const stored = await loadStored(sql, room);
  if (!stored || stored.seqs.length === 0) return null;
  const doc = new Y.Doc();
  let state: Uint8Array;
  let sv: Uint8Array;
  try {
    Y.applyUpdate(doc, stored.state);
    for (const u of stored.updates) Y.applyUpdate(doc, u);
    state = Y.encodeStateAsUpdate(doc);
    sv = Y.encodeStateVector(doc);
  } finally {
    doc.destroy();
  }
  // The document is garbage now: collect it before waiting for the next job (a 4 MiB one held
  // tens of MB of this thread's heap).
  Bun.gc(true);
  const won = await commitCompaction(sql, room, stored.gen, state, sv, stored.seqs);
  return { won, bytes: state.byteLength, merged: won ? stored.seqs.length : 0, mergedBytes: won ? stored.logBytes : 0 };
}

// One job at a time: two big documents merged at once would double the memory for no gain.
let chain: Promise<unknown> = Promise.resolve();
self.onmessage = (e: MessageEvent<CompactJob>) => {
  const { id, url, room } = e.data;
  chain = chain.then(
    () =>
      compact(url, room).then(
        (result) => self.postMessage({ id, result } satisfies CompactReply),
        (err) =>
          self.postMessage({ id, error: err instanceof Error ? err.message : String(err) } satisfies CompactReply),
      ),
    () => {},
  );
};
