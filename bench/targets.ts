import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { startChild, assertPortFree, waitHttp, type Child } from './procs.ts';
import { freePort } from '../src/store/ports.ts';
import { REFERENCE_SDL } from './data.ts';
import { ensurePeers, peerNode, peerScript } from './peers.ts';

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
  // BENCH_PROF_INTERVAL_US: a finer sampling interval than Bun's default 1 ms (100 µs sees the pieces of a 20 µs request).
  const interval = process.env.BENCH_PROF_INTERVAL_US
    ? [`--cpu-prof-interval=${process.env.BENCH_PROF_INTERVAL_US}`]
    : [];
  return {
    args: ['--cpu-prof', ...interval, `--cpu-prof-dir=${OUT_DIR}`, `--cpu-prof-name=${file}`],
    file: join(OUT_DIR, file),
  };
}

async function stopTarget(child: Child, extra?: () => void): Promise<void> {
  await child.stop('SIGINT', 15_000);
  extra?.();
}

/**
 * Starts the service with its own SVC_DATA_DIR, ports and root token on `databaseUrl`.
 * `BENCH_PORT` pins the API port (checked first: a port in use is one clear error).
 */
export async function startService(
  databaseUrl: string,
  opts: { env?: Record<string, string | undefined>; profile?: string; pinnedPort?: number },
): Promise<Target & { rootToken: string; gatewayUrl: string; dataDir: string }> {
  const port = opts.pinnedPort ?? (await freePort());
  if (opts.pinnedPort) await assertPortFree(port, 'BENCH_PORT');
  const realtimePort = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-data-'));
  const rootToken = `rt_bench_${randomBytes(12).toString('hex')}`;
  const prof = profileArgs(opts.profile);
  const child = startChild(process.execPath, [...prof.args, join(ROOT, 'src', 'main.ts')], {
    label: 'svc',
    cwd: ROOT,
    logFile: join(dataDir, 'service.log'),
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
    throw new Error(
      /in use/i.test(msg)
        ? `port ${port} is in use (the service could not listen)`
        : `the service did not start: ${msg}`,
    );
  }
  return {
    child,
    url,
    gatewayUrl: `http://127.0.0.1:${realtimePort}`,
    endpoint: `${url}/graphql`,
    rootToken,
    dataDir,
    profile: prof.file,
    stop: () => stopTarget(child, () => rmSync(dataDir, { recursive: true, force: true })),
  };
}

export const REFERENCES = ['ceiling-static', 'ceiling-jit', 'postgraphile', 'yoga-jit', 'yoga-cached'] as const;
export type ReferenceName = (typeof REFERENCES)[number];

/**
 * The Node peers (PostGraphile 5, GraphQL Yoga) run on Node 22 from bench/.peers, what their
 * users run (PostGraphile 5 needs Node ≥ 22.15; this machine's Node may be older). Without it
 * (no registry) they run on the system Node when it is new enough, else the rows say why.
 */
function peerRuntime(): string | undefined {
  const n = peerNode();
  if (n) return n;
  const [major, minor] = nodeVersion();
  return major > 22 || (major === 22 && minor >= 15) ? 'node' : undefined;
}

function nodeVersion(): [number, number] {
  try {
    const v = execFileSync('node', ['--version']).toString().trim().replace(/^v/, '').split('.').map(Number);
    return [v[0] ?? 0, v[1] ?? 0];
  } catch {
    return [0, 0];
  }
}

/** A Node to run the Node peers on (bench/.peers' Node 22 first), or undefined. */
export function nodeForPeers(): string | undefined {
  return peerRuntime();
}

export function hasNode(): boolean {
  return peerRuntime() !== undefined;
}

export function runtimeOf(name: ReferenceName): string {
  return name === 'postgraphile' || name.startsWith('yoga-') ? 'node' : 'bun';
}

export async function startReference(
  name: ReferenceName,
  opts: { databaseUrl?: string; bodyFile?: string; profile?: string },
): Promise<Target> {
  const port = await freePort();
  const dir = join(import.meta.dir, 'references');
  const env: Record<string, string> = {
    PORT: String(port),
    BENCH_DATABASE_URL: opts.databaseUrl ?? '',
    BENCH_BODY_FILE: opts.bodyFile ?? '',
    BENCH_SDL: REFERENCE_SDL,
  };
  const bunProf = profileArgs(opts.profile);
  let cmd: string;
  let args: string[];
  let path = '/';
  if (name === 'ceiling-static') [cmd, args] = [process.execPath, [...bunProf.args, join(dir, 'static.ts')]];
  else if (name === 'ceiling-jit') [cmd, args] = [process.execPath, [...bunProf.args, join(dir, 'jit.ts')]];
  else {
    const node = peerRuntime();
    if (!node) throw new Error(ensurePeers() ?? 'no Node ≥ 22.15 to run it on');
    const script = name === 'postgraphile' ? 'postgraphile.mjs' : 'yoga.mjs';
    if (name === 'yoga-cached') env.BENCH_YOGA_CACHE = '1';
    [cmd, args, path] = [node, [peerScript(script)], '/graphql'];
  }
  const child = startChild(cmd, args, {
    label: name,
    cwd: ROOT,
    env: { ...env, GRAPHILE_ENV: 'production', NODE_ENV: 'production' },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHttp(url + path, child, 60_000);
  } catch (err) {
    await child.stop('SIGKILL', 0);
    throw new Error(`${name} did not start: ${(err as Error).message}`);
  }
  return {
    child,
    url,
    endpoint: url + path,
    profile: cmd === process.execPath ? bunProf.file : undefined,
    stop: () => stopTarget(child),
  };
}

/**
 * Read statements a service process has sent and reads that shared one (its /metrics, summed
 * over its read pools; src/store/coalesce.ts): the uncached rows say how many reads a statement
 * answered, since identical reads waiting for the pool share one. Undefined if unreadable.
 */
export async function readStatements(
  t: Pick<Target, 'url'>,
): Promise<{ statements: number; coalesced: number } | undefined> {
  try {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const sum = (name: string) =>
      text
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`))
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    return { statements: sum('svc_read_statements_total'), coalesced: sum('svc_read_coalesced_total') };
  } catch {
    return undefined;
  }
}
