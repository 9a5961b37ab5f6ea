import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import type postgres from 'postgres';
import type { Sql } from '../store/db.ts';
import type { Statement } from '../content/tx.ts';
import type { Content } from './content.ts';

/**
 * The stored document of a room (sql/012_collab.sql, sql/051_collab_log.sql): a compacted state
 * in collab_state plus the deltas saves appended to collab_log since. Used by the rooms (main
 * thread) and by the compactor worker (compactor-worker.ts), so it imports no room code.
 */
type Tx = Sql | postgres.TransactionSql<Record<string, never>>;
const q = (tx: Tx) => tx as unknown as Sql;

/** One save's updates as one value: lib0 var-length byte arrays, in order. */
export function packUpdates(updates: readonly Uint8Array[]): Uint8Array {
  const enc = encoding.createEncoder();
  for (const u of updates) encoding.writeVarUint8Array(enc, u);
  return encoding.toUint8Array(enc);
}

export function unpackUpdates(bytes: Uint8Array): Uint8Array[] {
  const dec = decoding.createDecoder(bytes);
  const out: Uint8Array[] = [];
  while (decoding.hasContent(dec)) out.push(decoding.readVarUint8Array(dec));
  return out;
}

export interface StoredDoc {
  state: Uint8Array;
  base: Content;
  gen: number;
  /** The log's updates after `state`, in order. */
  updates: Uint8Array[];
  /** The log rows read (what a compaction of this read merges) and their bytes. */
  seqs: string[];
  logBytes: number;
}

interface Row {
  state: Uint8Array | null;
  base: Content | null;
  gen: string | null;
  seq: string | null;
  updates: Uint8Array | null;
}

/**
 * The state row and the log rows in ONE statement, so one snapshot: read apart, a compaction
 * committing in between would leave the state read before it and the log read after it, without
 * the rows it merged.
 */
function readRows(tx: Tx, room: string): Promise<Row[]> {
  return q(tx)<Row[]>`select s.state, s.base, s.gen::text as gen, null::text as seq, null::bytea as updates
      from collab_state s where s.room = ${room}
    union all
    select null, null, null, l.seq::text, l.updates from collab_log l where l.room = ${room}
    order by seq nulls first`;
}

function stored(rows: Row[]): StoredDoc | null {
  const head = rows[0];
  if (!head || head.seq !== null || head.state === null) return null;
  const updates: Uint8Array[] = [];
  const seqs: string[] = [];
  let logBytes = 0;
  for (const r of rows.slice(1)) {
    seqs.push(r.seq!);
    logBytes += r.updates!.byteLength;
    for (const u of unpackUpdates(new Uint8Array(r.updates!))) updates.push(u);
  }
  return {
    state: new Uint8Array(head.state),
    base: head.base ?? {},
    gen: Number(head.gen),
    updates,
    seqs,
    logBytes,
  };
}

export async function loadStored(tx: Tx, room: string): Promise<StoredDoc | null> {
  return stored(await readRows(tx, room));
}

/**
 * Replaces the state by a compaction of it and the rows `seqs`, if the state is still generation
 * `gen`; deletes exactly those rows. One statement: all of it or nothing. False when another
 * compaction won (then nothing changed).
 */
export async function commitCompaction(
  tx: Tx,
  room: string,
  gen: number,
  state: Uint8Array,
  sv: Uint8Array,
  seqs: readonly string[],
): Promise<boolean> {
  const [row] = await q(tx)`with s as (
      update collab_state set state = ${Buffer.from(state)}, sv = ${Buffer.from(sv)}, gen = gen + 1
       where room = ${room} and gen = ${gen} returning 1
    ), d as (
      delete from collab_log where room = ${room} and seq = any(${`{${seqs.join(',')}}`}::bigint[])
         and exists (select 1 from s) returning 1
    ) select (select count(*) from s)::int as won, (select count(*) from d)::int as deleted`;
  return row!.won === 1;
}

/** Stores the first state of a room unless another process stored one first (then false). */
export async function insertState(
  tx: Tx,
  room: string,
  projectId: string,
  recordId: string,
  s: { state: Uint8Array; sv: Uint8Array; base: Content },
): Promise<boolean> {
  const rows = await q(tx)`insert into collab_state (room, project_id, record_id, state, sv, base)
    values (${room}, ${projectId}, ${recordId}, ${Buffer.from(s.state)}, ${Buffer.from(s.sv)}, ${q(tx).json(s.base as never)})
    on conflict (room) do nothing returning room`;
  return rows.length > 0;
}

/**
 * Locks the room's stored state for the transaction; null when there is none, else the newest
 * state vector the stored document is known to cover (see durableSvSql).
 */
export async function lockState(tx: Tx, room: string): Promise<{ sv: Uint8Array | null } | null> {
  const [row] = await q(tx)<{ sv: Uint8Array | null }[]>`select coalesce(
      (select l.sv from collab_log l where l.room = s.room order by l.seq desc limit 1), s.sv) as sv
    from collab_state s where s.room = ${room} for update of s`;
  return row ? { sv: row.sv ? new Uint8Array(row.sv) : null } : null;
}

/**
 * SQL for the state vector the stored document covers at least (every struct below it is
 * stored), base64: the newest log row's, else the state's. `room` is an SQL expression.
 */
export function durableSvSql(room: string): string {
  return `encode(coalesce((select l.sv from collab_log l where l.room = ${room} order by l.seq desc limit 1),
    (select s2.sv from collab_state s2 where s2.room = ${room})), 'base64')`;
}

/** The record locale a room stands for: where its `base` is read from. */
export interface RecordLocale {
  recordId: string;
  locale: string;
  defaultLocale: string;
}

/** One save: its updates (none: only `base` changes) and the document's state vector. */
export interface Append {
  updates: Uint8Array[];
  sv: Uint8Array;
  /**
   * Set `base` to the record's working content as this transaction sees it (the record row is
   * locked): after a save's write, or a merge of outside writes, that is what the document is
   * reconciled with. Read by PostgreSQL rather than sent: a save of a large record sent its
   * whole content once more (2 MB for two 1,000,000-character fields). Null: unchanged.
   */
  rebase: RecordLocale | null;
}

/** The working content of a record locale in SQL (as readDraft reads it); `$r`, `$l`, `$d` placeholders. */
const DRAFT_SQL = (r: string, l: string, d: string) => `coalesce(
    (select c.data from record_content c where c.record_id = ${r} and c.stage = 'draft' and c.locale = ${l}),
    (select c.data from record_content c where c.record_id = ${r} and c.stage = 'draft' and c.locale = ${d}),
    '{}'::jsonb)`;

export async function append(tx: Tx, room: string, a: Append): Promise<void> {
  if (a.updates.length > 0)
    await q(tx)`insert into collab_log (room, updates, sv)
      values (${room}, ${Buffer.from(packUpdates(a.updates))}, ${Buffer.from(a.sv)})`;
  if (a.rebase)
    await q(tx).unsafe(
      `update collab_state set base = ${DRAFT_SQL('$2', '$3', '$4')}, updated_at = now() where room = $1`,
      [room, a.rebase.recordId, a.rebase.locale, a.rebase.defaultLocale],
    );
}

const b64 = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength).toString('base64');

/**
 * `append` as one statement of a record write's transaction (statements travel with literals),
 * after the write: the base it reads is the record as written.
 */
export function appendStatement(room: string, a: Append): Statement {
  return {
    text: `with l as (insert into collab_log (room, updates, sv)
        select $1, decode($2, 'base64'), decode($3, 'base64') where $2 is not null)
      update collab_state set base = case when $4 then ${DRAFT_SQL('$5', '$6', '$7')} else base end,
        updated_at = now() where room = $1`,
    params: [
      room,
      a.updates.length > 0 ? b64(packUpdates(a.updates)) : null,
      b64(a.sv),
      a.rebase !== null,
      a.rebase?.recordId ?? null,
      a.rebase?.locale ?? null,
      a.rebase?.defaultLocale ?? null,
    ],
  };
}
