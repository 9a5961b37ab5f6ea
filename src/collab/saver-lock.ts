import type { Sql } from '../store/db.ts';
import { literal } from '../content/tx.ts';

/**
 * The saver election of rooms: one PostgreSQL session advisory lock per room, held by the process
 * that saves the room, all on one dedicated connection of this process (the lock session).
 *
 * A session lock lives as long as its backend: a dropped connection, a terminated backend or a
 * pool recycling the connection frees every lock without telling anyone. So the session is a
 * connection of its own (never idle-closed, never recycled), and its loss is detected three ways:
 * the client's `onclose`, a periodic `check()` of the backend pid, and `held()` inside every
 * save's transaction, which commits the save only while the lock is still held by this session's
 * backend. A lost session bumps the epoch: every lease taken before it is void, and `onLost`
 * tells the rooms to re-acquire (or to stand by if another process took over meanwhile).
 */
export interface Lease {
  key: string;
  epoch: number;
}

interface Session {
  sql: Sql;
  pid: number;
  epoch: number;
}

/** Salt of the lock keys (hashtextextended(room key, SALT)). */
const SALT = 727014;

export class SaverLocks {
  readonly #open: (onclose: () => void) => Sql;
  readonly #onLost: () => void;
  #session: Promise<Session> | undefined;
  #epoch = 0;
  #closed = false;
  /** Lock sessions lost so far (for diagnostics and tests). */
  losses = 0;

  constructor(open: (onclose: () => void) => Sql, onLost: () => void) {
    this.#open = open;
    this.#onLost = onLost;
  }

  #connect(): Promise<Session> {
    if (this.#session) return this.#session;
    const epoch = this.#epoch;
    const sql = this.#open(() => this.#lost(epoch));
    const session = (async () => {
      const [row] = await sql`select pg_backend_pid() as pid`;
      return { sql, pid: row!.pid as number, epoch };
    })();
    this.#session = session;
    session.catch(() => this.#lost(epoch));
    return session;
  }

  /** The session of `epoch` is gone: forget it, void its leases, tell the rooms. */
  #lost(epoch: number): void {
    if (epoch !== this.#epoch || this.#closed) return;
    const old = this.#session;
    this.#session = undefined;
    this.#epoch++;
    this.losses++;
    void old?.then((s) => s.sql.end({ timeout: 0 })).catch(() => {});
    console.error('collab: the saver lock session was lost; rooms re-acquire their locks');
    this.#onLost();
  }

  /** Takes the room's lock when no process holds it; null when another one does. */
  async acquire(key: string): Promise<Lease | null> {
    if (this.#closed) return null;
    const s = await this.#connect();
    const [row] =
      await s.sql`select pg_try_advisory_lock(hashtextextended(${key}, ${SALT})) as ok, pg_backend_pid() as pid`;
    if (row!.pid !== s.pid) {
      // The client reconnected under us: whatever the old backend held is gone.
      if (row!.ok) await s.sql`select pg_advisory_unlock(hashtextextended(${key}, ${SALT}))`.catch(() => {});
      this.#lost(s.epoch);
      return null;
    }
    return row!.ok === true ? { key, epoch: s.epoch } : null;
  }

  async release(lease: Lease): Promise<void> {
    if (!this.valid(lease)) return;
    const s = await this.#session!;
    await s.sql`select pg_advisory_unlock(hashtextextended(${lease.key}, ${SALT}))`;
  }

  /** False once the lease's session is known to be lost. */
  valid(lease: Lease | null): lease is Lease {
    return lease !== null && lease.epoch === this.#epoch && this.#session !== undefined && !this.#closed;
  }

  /**
   * Inside a save's transaction (after the row it writes is locked): whether this session's
   * backend still holds the lease. A bigint advisory key shows in pg_locks as its high half in
   * `classid`, its low half in `objid`, `objsubid` 1.
   */
  async held(tx: Sql, lease: Lease): Promise<boolean> {
    if (!this.valid(lease)) return false;
    const s = await this.#session!;
    const [row] =
      await tx`select exists (select 1 from pg_locks where locktype = 'advisory' and granted and objsubid = 1
        and pid = ${s.pid}
        and classid::bigint = ((hashtextextended(${lease.key}, ${SALT}) >> 32) & 4294967295)
        and objid::bigint = (hashtextextended(${lease.key}, ${SALT}) & 4294967295)) as ok`;
    if (row!.ok !== true) {
      this.#lost(s.epoch);
      return false;
    }
    return true;
  }

  /**
   * `held()` as a SQL expression for a statement of the save's own transaction (sent with it in
   * one message), and what to do with its answer: `confirm(false)` voids the session's leases
   * as `held()` does. Null when the lease is known to be void already.
   */
  async heldCheck(lease: Lease): Promise<{ expr: string; confirm(ok: boolean): boolean } | null> {
    if (!this.valid(lease)) return null;
    const s = await this.#session!;
    const hash = `hashtextextended(${literal(lease.key)}, ${SALT})`;
    return {
      expr: `exists (select 1 from pg_locks where locktype = 'advisory' and granted and objsubid = 1 and pid = ${Number(s.pid)}
        and classid::bigint = ((${hash} >> 32) & 4294967295) and objid::bigint = (${hash} & 4294967295))`,
      confirm: (ok) => {
        if (!ok) this.#lost(s.epoch);
        return ok;
      },
    };
  }

  /** The periodic check: the session's backend is the one that took the locks. */
  async check(): Promise<void> {
    const current = this.#session;
    if (!current || this.#closed) return;
    let s: Session;
    try {
      s = await current;
    } catch {
      return;
    }
    try {
      const [row] = await s.sql`select pg_backend_pid() as pid`;
      if (row!.pid !== s.pid) this.#lost(s.epoch);
    } catch {
      this.#lost(s.epoch);
    }
  }

  /** The backend pid of the lock session (tests and diagnostics), or null without one. */
  async pid(): Promise<number | null> {
    return this.#session ? (await this.#session).pid : null;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const s = this.#session;
    this.#session = undefined;
    if (s) await (await s.catch(() => undefined))?.sql.end({ timeout: 2 });
  }
}
