import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { homedir } from 'node:os';

/**
 * What svc keeps in its data dir (`SVC_DATA_DIR`, default `./.svc`), so `svc data rm` can remove
 * exactly that and nothing a person put beside it:
 *  - root-token, secrets-key: the generated root token and the project secrets key;
 *  - pg-password, pg/: the embedded PostgreSQL's password and cluster (DATABASE_URL unset);
 *  - pg-location: as root, when the `postgres` user cannot enter the data dir, the cluster is
 *    kept under /var/lib/svc/clusters/<id> instead and this file says where (embedded-reach.ts);
 *  - files/: uploaded files on local storage; mail/: the local outbox (no SVC_SMTP_URL);
 *  - svc-processes/: one file per running svc process (its pid), so nothing is removed under a server.
 * Names such as `files` or `pg` are common: a folder counts as a data dir only when it holds one
 * of the files only svc writes (SIGNATURE), so `/` or a home folder is never taken for one.
 */
const SIGNATURE = ['root-token', 'secrets-key', 'pg-password', 'pg-location'];
const ENTRIES = [...SIGNATURE, 'pg', 'files', 'mail', 'svc-processes'];
const RUNNING = 'svc-processes';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is just not ours to signal.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Marks a running process in `dataDir/run/`; the returned function unmarks it (at shutdown). */
export function markRunning(dataDir: string, pid = process.pid): () => void {
  const dir = join(dataDir, RUNNING);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, String(pid));
  writeFileSync(file, `${pid}\n`);
  return () => rmSync(file, { force: true });
}

/** The cluster folder of `dataDir`: where pg-location points, else `dataDir/pg`. */
function clusterOf(dataDir: string): string {
  const marker = join(dataDir, 'pg-location');
  return existsSync(marker) ? readFileSync(marker, 'utf8').trim() : join(dataDir, 'pg');
}

/** Why the data dir is in use (a live svc process or PostgreSQL on it), or null. */
export function inUse(dataDir: string): string | null {
  const run = join(dataDir, RUNNING);
  if (existsSync(run)) {
    for (const name of readdirSync(run)) {
      const pid = Number(name);
      if (Number.isInteger(pid) && pid > 0 && alive(pid)) return `svc is running on it (pid ${pid})`;
    }
  }
  const postmaster = join(clusterOf(dataDir), 'postmaster.pid');
  if (existsSync(postmaster)) {
    const pid = Number(readFileSync(postmaster, 'utf8').split('\n')[0]);
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) return `its PostgreSQL is running (pid ${pid})`;
  }
  return null;
}

export interface DataDirPlan {
  dataDir: string;
  /** What would be removed: svc's entries in the data dir, and a cluster kept outside it. */
  remove: string[];
  /** Entries svc did not make: left in place (the data dir then stays too). */
  keep: string[];
}

export class DataDirError extends Error {}

/** A path in a message: quoted and escaped, so any name stays on one line. */
const q = (path: string): string => JSON.stringify(path);

/** What `svc data rm` would remove; throws DataDirError when it must not (see `removeDataDir`). */
export function planRemoval(dataDir: string): DataDirPlan {
  if (!existsSync(dataDir)) throw new DataDirError(`${q(dataDir)} does not exist`);
  if (dataDir === dirname(dataDir) || dataDir === homedir())
    throw new DataDirError(`${q(dataDir)} is not a data dir; refusing to touch it`);
  const names = readdirSync(dataDir);
  if (!names.some((n) => SIGNATURE.includes(n)))
    throw new DataDirError(
      `${q(dataDir)} is not an svc data dir (it holds none of ${SIGNATURE.join(', ')}); refusing to touch it`,
    );
  const ours = names.filter((n) => ENTRIES.includes(n));
  const busy = inUse(dataDir);
  if (busy) throw new DataDirError(`${q(dataDir)} is in use: ${busy}; stop svc first`);
  const remove = ours.map((n) => join(dataDir, n));
  const cluster = clusterOf(dataDir);
  // A cluster kept outside (as root): only a folder that is a PostgreSQL cluster, or gone already.
  if (cluster !== join(dataDir, 'pg') && existsSync(cluster)) {
    if (!existsSync(join(cluster, 'PG_VERSION')))
      throw new DataDirError(
        `pg-location points to ${q(cluster)}, which is not a PostgreSQL cluster; refusing to touch it`,
      );
    remove.unshift(cluster);
  }
  return { dataDir, remove, keep: names.filter((n) => !ENTRIES.includes(n)).map((n) => join(dataDir, n)) };
}

/**
 * Removes what svc made for `dataDir` (`planRemoval`), then the data dir itself when nothing
 * else is left in it. Refuses while a server runs on it, and a folder svc did not make.
 */
export function removeDataDir(dataDir: string): DataDirPlan & { removedDir: boolean } {
  const plan = planRemoval(dataDir);
  for (const path of plan.remove) rmSync(path, { recursive: true, force: true });
  let removedDir = false;
  if (plan.keep.length === 0) {
    rmdirSync(dataDir);
    removedDir = true;
  }
  return { ...plan, removedDir };
}
