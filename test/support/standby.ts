import { chownSync, existsSync, mkdtempSync, rmSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import postgres from 'postgres';
import { freePort } from '../../src/store/ports.ts';
import { blockedAt } from '../../src/store/embedded-reach.ts';

/**
 * A PostgreSQL 15 primary and its hot standby of our own, for the read-replica tests: `initdb`
 * in a temporary directory (wal_level replica, a pg_hba line for replication), started on a
 * free port, then `pg_basebackup -R` into a second directory started on another port. The
 * suite's shared server is never touched (its pg_hba has no replication line, and others' tests
 * run on it). As root the binaries run as `postgres` (initdb refuses root). `stop()` stops both
 * and removes their directories.
 */
const BIN = '/usr/lib/postgresql/15/bin';
const TOOLS = ['initdb', 'pg_ctl', 'pg_basebackup', 'postgres'];

/** Why standbys cannot be made on this machine, or undefined when they can. */
export function standbyUnavailable(): string | undefined {
  const missing = TOOLS.filter((t) => !existsSync(join(BIN, t)));
  if (missing.length)
    return `PostgreSQL 15 binaries not found (${missing.join(', ')} missing in ${BIN}): the read-replica tests are skipped; install the Debian package "postgresql-15" (apt-get install postgresql-15)`;
  if (process.getuid?.() === 0 && !existsSync('/usr/sbin/runuser') && !existsSync('/sbin/runuser'))
    return 'read-replica tests need runuser (util-linux) to run PostgreSQL as postgres';
  return undefined;
}

/**
 * For `describe.skipIf(skipStandby())`: prints one line saying why when the tests cannot run;
 * under CI (CI set) a skip is a failure instead.
 */
export function skipStandby(): boolean {
  const why = standbyUnavailable();
  if (!why) return false;
  // As test/support/binaries.ts: in CI (CI set) a skip would hide tests that never ran.
  if (process.env.CI) throw new Error(`${why} (CI=true: this may not be skipped)`);
  console.log(`skip: ${why}`);
  return true;
}

export interface StandbyPair {
  /** The folder both clusters live in (`stopPairIn(dir)` stops them from another process). */
  dir: string;
  /** Server URLs (database `postgres`); `db(url, name)` names another database on it. */
  primaryUrl: string;
  standbyUrl: string;
  /** Stops the standby at once (as a crash would), and starts it again. */
  killStandby(): Promise<void>;
  startStandby(): Promise<void>;
  /** pg_wal_replay_pause() / pg_wal_replay_resume() on the standby. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  stop(): Promise<void>;
}

/** `url` with its database set to `name`. */
export function onDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

function asPostgres(cmd: string, args: string[]): string {
  const full = join(BIN, cmd);
  const [file, argv] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', full, ...args]] : [full, args];
  return execFileSync(file, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
}

/** Polls `select 1` on `url` until it answers; after `ms`, throws `failure` with the last error. */
async function waitUp(
  url: string,
  ms = 60_000,
  failure = `PostgreSQL at ${url} did not come up`,
  pauseMs = 200,
): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    const c = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
    try {
      await c`select 1`;
      return;
    } catch (err) {
      if (Date.now() > end) throw new Error(`${failure}: ${(err as Error).message}`);
    } finally {
      await c.end({ timeout: 1 }).catch(() => {});
    }
    await Bun.sleep(pauseMs);
  }
}

export interface PairOptions {
  /**
   * max_connections of both (a hot standby needs at least the primary's). 60 suits one test
   * file; a whole suite on the pair (.ci/replicas) starts many services with several pools each.
   */
  maxConnections?: number;
  /**
   * The standby applies each commit this long after the primary made it
   * (`recovery_min_apply_delay`). On one box replay takes about a millisecond, so a read that
   * wrongly goes to the standby right after a write would almost always find the write there
   * anyway; with a delay it finds the old state, and the test that wrote then read fails.
   */
  applyDelayMs?: number;
}

/**
 * Stops both clusters of a pair made in `dir` (at once, as a crash would: they are thrown away)
 * and removes the folder: `StandbyPair.stop`, and test/support/standby-cli.ts for a pair another
 * process started.
 */
export function stopPairIn(dir: string): void {
  if (!/(^|\/)svc-standby-[^/]+$/.test(dir)) throw new Error(`not a standby pair's folder: ${dir}`);
  for (const d of [join(dir, 'standby'), join(dir, 'primary')]) {
    if (!existsSync(join(d, 'postmaster.pid'))) continue;
    try {
      asPostgres('pg_ctl', ['-D', d, '-m', 'immediate', '-w', 'stop']);
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true });
}

export async function startStandbyPair(opts: PairOptions = {}): Promise<StandbyPair> {
  const pgUid =
    process.getuid?.() === 0 ? Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()) : undefined;
  const pgGid =
    process.getuid?.() === 0 ? Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()) : undefined;
  // As root the clusters run as postgres, which must be able to enter the temp dir: a private
  // one (the bench's TMPDIR is a 0700 folder of root's) is passed over for /tmp.
  const parent = pgUid === undefined || blockedAt(tmpdir(), { uid: pgUid, gid: pgGid! }) === null ? tmpdir() : '/tmp';
  const dir = mkdtempSync(join(parent, 'svc-standby-'));
  if (pgUid !== undefined) chownSync(dir, pgUid, pgGid!);
  const primaryDir = join(dir, 'primary');
  const standbyDir = join(dir, 'standby');
  const [pport, sport] = [await freePort(), await freePort()];
  const primaryUrl = `postgres://postgres@127.0.0.1:${pport}/postgres`;
  const standbyUrl = `postgres://postgres@127.0.0.1:${sport}/postgres`;
  const ctl = (data: string, ...args: string[]) =>
    asPostgres('pg_ctl', ['-D', data, '-l', `${data}.log`, '-w', '-t', '60', ...args]);
  let started: string[] = [];
  const stop = async () => {
    for (const d of started.splice(0).reverse()) {
      try {
        asPostgres('pg_ctl', ['-D', d, '-m', 'immediate', '-w', 'stop']);
      } catch {}
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    asPostgres('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    // Small and quick: these clusters live for one test file on a shared machine.
    const conf = [
      `port = ${pport}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'wal_level = replica',
      'max_wal_senders = 4',
      'hot_standby = on',
      `max_connections = ${opts.maxConnections ?? 60}`,
      'shared_buffers = 16MB',
      'fsync = off',
      'full_page_writes = off',
      'wal_keep_size = 256MB',
      // The standby answers reads while it replays; long enough for a test's reads.
      'max_standby_streaming_delay = 5s',
    ].join('\n');
    appendFileSync(join(primaryDir, 'postgresql.conf'), `\n${conf}\n`);
    appendFileSync(join(primaryDir, 'pg_hba.conf'), '\nhost replication all 127.0.0.1/32 trust\n');
    ctl(primaryDir, 'start');
    started.push(primaryDir);
    await waitUp(primaryUrl);
    asPostgres('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(pport),
      '-U',
      'postgres',
      '-D',
      standbyDir,
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
    const delay = opts.applyDelayMs ? `recovery_min_apply_delay = ${Math.round(opts.applyDelayMs)}\n` : '';
    appendFileSync(join(standbyDir, 'postgresql.conf'), `\nport = ${sport}\n${delay}`);
    ctl(standbyDir, 'start');
    started.push(standbyDir);
    await waitUp(standbyUrl);
  } catch (err) {
    await stop();
    throw err;
  }
  const onStandby = async (text: string) => {
    const c = postgres(standbyUrl, { max: 1, onnotice: () => {} });
    try {
      await c.unsafe(text);
    } finally {
      await c.end();
    }
  };
  return {
    dir,
    primaryUrl,
    standbyUrl,
    async killStandby() {
      asPostgres('pg_ctl', ['-D', standbyDir, '-m', 'immediate', '-w', 'stop']);
      started = started.filter((d) => d !== standbyDir);
    },
    async startStandby() {
      ctl(standbyDir, 'start');
      started.push(standbyDir);
      await waitUp(standbyUrl);
    },
    pauseReplay: () => onStandby('select pg_wal_replay_pause()'),
    resumeReplay: () => onStandby('select pg_wal_replay_resume()'),
    stop,
  };
}

/**
 * Creates database `name` on the pair's primary and waits until the standby has replayed it and
 * takes connections to it; answers both URLs.
 */
export async function replicatedDatabase(
  pair: StandbyPair,
  name: string,
): Promise<{ primaryDb: string; standbyDb: string }> {
  const admin = postgres(pair.primaryUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const standbyDb = onDatabase(pair.standbyUrl, name);
  await waitUp(standbyDb, 30_000, `the standby never showed database ${name}`, 100);
  return { primaryDb: onDatabase(pair.primaryUrl, name), standbyDb };
}
