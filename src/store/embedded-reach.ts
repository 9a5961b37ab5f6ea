import {
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  chmodSync,
  writeFileSync,
} from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';

/**
 * As root, the embedded PostgreSQL runs as the `postgres` system user, which must be able to
 * reach both its binaries and its cluster. Projects usually live under /root (mode 0700), where
 * it cannot. Rather than refuse, what it cannot reach is kept where it can, under `hostDir`
 * (default /var/lib/svc): the binaries are copied once per version, and the cluster gets a folder
 * tied to the data dir by `SVC_DATA_DIR/pg-location`, so the next start finds and reuses it.
 */
export const HOST_DIR = '/var/lib/svc';

export interface PgUser {
  uid: number;
  gid: number;
}

/** The first folder on the way to `path` the user may not enter (owner/group/other bits), or null. */
export function blockedAt(path: string, user: PgUser): string | null {
  const chain: string[] = [];
  for (let d = path; ; d = dirname(d)) {
    chain.unshift(d);
    if (d === dirname(d)) break;
  }
  for (const d of chain) {
    const st = statSync(d);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) return d;
  }
  return null;
}

/** The binaries folder (holding bin/, lib/, share/) the user can run: in place, or a reused copy. */
export function reachableBinaries(nativeDir: string, user: PgUser, hostDir = HOST_DIR): string {
  if (blockedAt(join(nativeDir, 'bin'), user) === null) return nativeDir;
  const version = (JSON.parse(readFileSync(join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string })
    .version;
  const target = join(hostDir, `postgres-${version}`);
  if (existsSync(join(target, 'bin', 'postgres'))) return target;
  mkdirSync(hostDir, { recursive: true, mode: 0o755 });
  // Copied aside and renamed into place, so a concurrent start never sees half a copy.
  const partial = `${target}.partial-${randomBytes(4).toString('hex')}`;
  cpSync(nativeDir, partial, { recursive: true, verbatimSymlinks: true });
  try {
    renameSync(partial, target);
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(join(target, 'bin', 'postgres'))) throw err;
  }
  return target;
}

export interface ClusterPlace {
  /** The cluster's folder. */
  dir: string;
  /** Set when the cluster is kept outside the data dir: why, for the start banner. */
  note?: string;
}

/** Where the cluster of `dataDir` lives (see the module comment). `user` is unset when not root. */
export function clusterPlace(dataDir: string, user: PgUser | undefined, hostDir = HOST_DIR): ClusterPlace {
  const marker = join(dataDir, 'pg-location');
  const relocated = (dir: string): ClusterPlace => {
    const blocked = user ? blockedAt(dataDir, user) : null;
    const why = blocked ? `the "postgres" user cannot enter ${blocked}` : 'it was set up there by an earlier start';
    return { dir, note: `kept outside ${dataDir} because ${why}; ${marker} points to it` };
  };
  if (existsSync(marker)) return relocated(readFileSync(marker, 'utf8').trim());
  const inPlace = join(dataDir, 'pg');
  if (!user) return { dir: inPlace };
  // The data dir itself is ours to open up (the cluster inside stays 0700, owned by postgres).
  const st = statSync(dataDir);
  if ((st.mode & 0o001) === 0) chmodSync(dataDir, (st.mode & 0o777) | 0o711);
  if (blockedAt(dataDir, user) === null) return { dir: inPlace };
  const id = createHash('sha256').update(realpathSync(dataDir)).digest('hex').slice(0, 16);
  const clusters = join(hostDir, 'clusters');
  mkdirSync(clusters, { recursive: true, mode: 0o755 });
  const dir = join(clusters, id);
  writeFileSync(marker, `${dir}\n`, { mode: 0o600 });
  return relocated(dir);
}
