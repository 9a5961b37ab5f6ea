import { readFileSync } from 'node:fs';
import { SQL } from 'bun';

/**
 * CPU time PostgreSQL's backends spend on one database over a window (issue 11: where a write's
 * time goes). Wall-clock throughput on a shared 2-core machine moves with everyone else's load;
 * CPU per operation — the service's and its backends' — does much less, and compares a write
 * with the write-ceiling's bare INSERT on a quiet machine's terms. Backends are listed from
 * `pg_stat_activity` every 100 ms and read from /proc, so this only works when PostgreSQL runs
 * on this machine (undefined otherwise). A backend that exits inside the window loses what it
 * used since its last sample (pools keep theirs open, so little is lost).
 */
const TICKS = 100;

function backendCpu(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / TICKS;
  } catch {
    return undefined;
  }
}

export interface PgCpu {
  end(): Promise<number | undefined>;
}

export async function pgCpuWindow(databaseUrl: string): Promise<PgCpu> {
  const sql = new SQL({ url: databaseUrl, max: 1 });
  const name = new URL(databaseUrl).pathname.slice(1);
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  let local = true;
  const sample = async (initial: boolean) => {
    const rows = (await sql.unsafe('select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [
      name,
    ])) as { pid: number }[];
    for (const { pid } of rows) {
      const c = backendCpu(pid);
      if (c === undefined) {
        // Unreadable: PostgreSQL is on another machine — or this backend just exited (a
        // client closing its pool), which later samples must not take for the former.
        if (initial && first.size === 0) local = false;
        continue;
      }
      local = true;
      // A backend first seen after the start used all its CPU inside the window (near enough).
      if (!first.has(pid)) first.set(pid, initial ? c : 0);
      last.set(pid, c);
    }
  };
  await sample(true);
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await Bun.sleep(100);
      if (!stopped) await sample(false).catch(() => {});
    }
  })();
  return {
    async end() {
      await sample(false).catch(() => {});
      stopped = true;
      await loop;
      await sql.close();
      if (!local || first.size === 0) return undefined;
      let total = 0;
      for (const [pid, c0] of first) total += (last.get(pid) ?? c0) - c0;
      return total;
    },
  };
}
