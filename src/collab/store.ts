import type postgres from 'postgres';
import type { Sql } from '../store/db.ts';
import type { Content } from './content.ts';
import type { Statement } from '../content/tx.ts';

/** The SQL of collaboration rooms (sql/012_collab.sql). Every query names its project or room. */
type Tx = Sql | postgres.TransactionSql<Record<string, never>>;
const q = (tx: Tx) => tx as unknown as Sql;

/** The working version of one record locale; `lock` takes the record row for the transaction. */
export async function readDraft(
  tx: Tx,
  projectId: string,
  modelKey: string,
  recordId: string,
  locale: string,
  defaultLocale: string,
  lock = false,
): Promise<Content | null> {
  const rows = await q(tx).unsafe(
    `select c.locale, c.data from records r
       left join record_content c on c.record_id = r.id and c.stage = 'draft' and c.locale in ($4, $5)
     where r.project_id = $1 and r.id = $2 and r.model_key = $3${lock ? ' for update of r' : ''}`,
    [projectId, recordId, modelKey, locale, defaultLocale],
  );
  if (rows.length === 0) return null;
  // A locale never written starts as the default locale's content (as updateRecord does).
  const own = rows.find((r) => r.locale === locale) ?? rows.find((r) => r.locale === defaultLocale);
  return (own?.data as Content | undefined) ?? {};
}

/**
 * readDraft (with the record row locked) as one statement of a save's transaction, with two more
 * columns: `held`, whether this process still holds the room's saver lock (SaverLocks.heldCheck),
 * or true; `sv`, the newest state vector the stored document of room `room` covers, base64
 * (`svExpr(p)`, p the room's placeholder: log-store.ts durableSvSql). No row: the record is gone.
 */
export function draftStatement(
  projectId: string,
  modelKey: string,
  recordId: string,
  locale: string,
  defaultLocale: string,
  heldExpr: string | null,
  room: string,
  svExpr: (placeholder: string) => string,
): Statement {
  return {
    text: `select c.locale, c.data, ${heldExpr ?? 'true'} as held, ${svExpr('$6')} as sv from records r
       left join record_content c on c.record_id = r.id and c.stage = 'draft' and c.locale in ($4, $5)
     where r.project_id = $1 and r.id = $2 and r.model_key = $3 for update of r`,
    params: [projectId, recordId, modelKey, locale, defaultLocale, room],
  };
}

/** The working version from draftStatement's rows (as readDraft reads it); null: no record. */
export function draftOf(
  rows: readonly Record<string, unknown>[],
  locale: string,
  defaultLocale: string,
): Content | null {
  if (rows.length === 0) return null;
  const own = rows.find((r) => r.locale === locale) ?? rows.find((r) => r.locale === defaultLocale);
  const data = own?.data;
  return ((typeof data === 'string' ? JSON.parse(data) : data) as Content | undefined) ?? {};
}

export async function recordExists(tx: Tx, projectId: string, modelKey: string, recordId: string): Promise<boolean> {
  const rows = await q(
    tx,
  )`select 1 from records where project_id = ${projectId} and id = ${recordId} and model_key = ${modelKey}`;
  return rows.length > 0;
}

/** A process counts for presence while its heartbeat is younger than this. */
export const PROCESS_TTL_SECONDS = 20;

export async function heartbeat(sql: Sql, processId: string): Promise<void> {
  await sql`insert into collab_processes (process_id) values (${processId})
    on conflict (process_id) do update set seen_at = now()`;
  // Housekeeping rides on the heartbeat: relay rows are read within milliseconds of their NOTIFY.
  await sql`delete from collab_updates where created_at < now() - interval '60 seconds'`;
  await sql`delete from collab_presence p where not exists (select 1 from collab_processes c
    where c.process_id = p.process_id and c.seen_at > now() - make_interval(secs => ${PROCESS_TTL_SECONDS}))`;
}

export async function forgetProcess(sql: Sql, processId: string): Promise<void> {
  await sql`delete from collab_presence where process_id = ${processId}`;
  await sql`delete from collab_processes where process_id = ${processId}`;
}

export async function setPresence(
  sql: Sql,
  room: string,
  processId: string,
  identity: string,
  clients: number,
): Promise<void> {
  if (clients <= 0)
    await sql`delete from collab_presence where room = ${room} and process_id = ${processId} and identity = ${identity}`;
  else {
    await sql`insert into collab_presence (room, process_id, identity, clients) values (${room}, ${processId}, ${identity}, ${clients})
      on conflict (room, process_id, identity) do update set clients = excluded.clients`;
  }
}

const LIVE = `exists (select 1 from collab_processes c where c.process_id = p.process_id
  and c.seen_at > now() - make_interval(secs => ${PROCESS_TTL_SECONDS}))`;

/** Rooms an identity holds in other live processes. */
export async function remoteHeldRooms(sql: Sql, identity: string, processId: string): Promise<string[]> {
  const rows = await sql.unsafe(
    `select distinct room from collab_presence p where identity = $1 and process_id <> $2 and ${LIVE}`,
    [identity, processId],
  );
  return rows.map((r) => r.room as string);
}

/** Other live processes with sockets in a room (by its key): they may hold unsaved edits. */
export async function remoteHolders(sql: Sql, room: string, processId: string): Promise<string[]> {
  const rows = await sql.unsafe(
    `select distinct process_id from collab_presence p where room = $1 and process_id <> $2 and clients > 0 and ${LIVE}`,
    [room, processId],
  );
  return rows.map((r) => r.process_id as string);
}

/** Sockets connected to a room (by its name, in any project) in other live processes. */
export async function remoteClients(sql: Sql, name: string, processId: string): Promise<number> {
  const [row] = await sql.unsafe(
    `select coalesce(sum(clients), 0)::int as n from collab_presence p
    where right(room, length($1) + 1) = '/' || $1 and process_id <> $2 and ${LIVE}`,
    [name, processId],
  );
  return (row?.n as number) ?? 0;
}

export interface RelayItem {
  room: string;
  kind: 0 | 1;
  userId: string | null;
  data: Uint8Array;
}

/**
 * A batch of relay rows plus one NOTIFY naming the batch's id range and origin, in one statement:
 * the rows of one process are written one batch at a time, so everything of `origin` between
 * the smallest and the largest id returned is this batch. Rows keep the batch's order (ids follow
 * the ordinality).
 */
export async function relayBatch(
  sql: Sql,
  channel: string,
  origin: string,
  items: readonly RelayItem[],
): Promise<void> {
  const rows = items.map((i) => [
    i.room,
    i.kind,
    i.userId,
    Buffer.from(i.data.buffer, i.data.byteOffset, i.data.byteLength).toString('base64'),
  ]);
  await sql`with i as (
      insert into collab_updates (room, origin, kind, user_id, data)
      select x.value->>0, ${origin}, (x.value->>1)::smallint, x.value->>2, decode(x.value->>3, 'base64')
        from jsonb_array_elements(${sql.json(rows as never)}::jsonb) with ordinality as x(value, n) order by x.n
      returning id
    ) select pg_notify(${channel}, json_build_object('t', 'b', 'p', ${origin}::text, 'lo', min(i.id), 'hi', max(i.id))::text) from i`;
}

export interface RelayRow {
  id: number;
  room: string;
  kind: 0 | 1;
  user_id: string | null;
  data: Uint8Array;
}

/**
 * The rows of the announced batches (`origin`, id range). The caller keeps those of rooms open
 * here: a batch holds only rooms open in more than one process, and passing this process's room
 * keys instead (1,000 of them) cost ~350 µs of client CPU per read (bench, session 4).
 */
export async function relayRows(
  sql: Sql,
  batches: readonly { p: string; lo: number; hi: number }[],
): Promise<RelayRow[]> {
  // The overall id bounds let PostgreSQL read the primary key's range; joined with the ranges
  // alone it chose to scan the whole table (a minute of rows: 600,000 at 10,000 updates/s), and
  // 22,000 rows in 4,460 batches took 12.5 s to read on this box (0.2 s with the bounds).
  const lo = Math.min(...batches.map((b) => b.lo));
  const hi = Math.max(...batches.map((b) => b.hi));
  const rows = await sql<RelayRow[]>`select u.id::int as id, u.room, u.kind, u.user_id, u.data from collab_updates u
    join jsonb_to_recordset(${sql.json(batches as never)}::jsonb) as b(p text, lo bigint, hi bigint) on u.origin = b.p and u.id between b.lo and b.hi
    where u.id between ${lo} and ${hi} order by u.id`;
  return rows.map((r) => ({ ...r, data: new Uint8Array(r.data) }));
}
