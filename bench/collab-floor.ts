/**
 * `bun bench/collab-floor.ts [rounds]`: the per-update CPU floor of the `collab` scenario. The
 * same load as `bun bench collab` (bench/collab-load.ts: ROOMS rooms × 2 editors × 5 updates/s,
 * two generator processes) against, in turn and alternated `rounds` times (default 2):
 *  - `relay`: a bare Bun WebSocket relay (bench/references/collab-floor-server.ts);
 *  - `apply`: the same relay plus Y.applyUpdate of every update into its room's document;
 *  - `y-websocket`: the reference of `bun bench collab` (y-websocket 1.5.4's server, Node).
 * Prints server CPU (user + system, every thread) per delivered update in µs. No database: it
 * says how much of the gateway's CPU per update any Bun server pays (receive, publish) and how
 * much applying each update to a Yjs document adds, against the reference's whole cost.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuWindow, startChild, waitHttp } from './procs.ts';
import { freePort } from '../src/store/ports.ts';
import { nodeForPeers } from './targets.ts';
import { peerFile } from './peers.ts';

const ROOMS = Number(process.env.BENCH_COLLAB_ROOMS || 1000);
const LOADERS = 2;
const WARMUP_MS = 3_000;
const DURATION_MS = Number(process.env.BENCH_DURATION || 5) * 1000;
const rounds = Number(process.argv[2] || 2);

interface Server {
  name: string;
  cmd: string;
  args: string[];
  env?: Record<string, string>;
}
const servers: Server[] = [
  {
    name: 'relay',
    cmd: process.execPath,
    args: [join(import.meta.dir, 'references', 'collab-floor-server.ts')],
    env: { FLOOR_MODE: 'relay' },
  },
  {
    name: 'apply',
    cmd: process.execPath,
    args: [join(import.meta.dir, 'references', 'collab-floor-server.ts')],
    env: { FLOOR_MODE: 'apply' },
  },
  ...(nodeForPeers()
    ? [{ name: 'y-websocket', cmd: nodeForPeers()!, args: [peerFile('y-websocket', 'bin', 'server.js')] }]
    : []),
];

async function once(s: Server): Promise<string> {
  const port = await freePort();
  const srv = startChild(s.cmd, s.args, { label: s.name, env: { ...s.env, PORT: String(port), HOST: '127.0.0.1' } });
  const dir = mkdtempSync(join(tmpdir(), 'collab-floor-'));
  const loaders: { child: ReturnType<typeof startChild>; out: () => string }[] = [];
  try {
    await waitHttp(`http://127.0.0.1:${port}/`, srv);
    const urls = Array.from({ length: ROOMS }, (_, i) => `ws://127.0.0.1:${port}/pad-${i}`);
    const per = Math.ceil(ROOMS / LOADERS);
    for (let i = 0; i < LOADERS; i++) {
      const file = join(dir, `load-${i}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          urls: urls.slice(i * per, (i + 1) * per),
          rate: 5,
          warmupMs: WARMUP_MS,
          durationMs: DURATION_MS,
        }),
      );
      const child = startChild(process.execPath, [join(import.meta.dir, 'collab-load.ts'), file], {
        label: `load-${i}`,
        cwd: join(import.meta.dir, '..'),
      });
      let out = '';
      child.proc.stdout?.on('data', (c: Buffer) => void (out += c.toString()));
      loaders.push({ child, out: () => out });
    }
    while (!loaders.every((l) => l.out().includes('COLLABREADY'))) {
      if (loaders.some((l) => l.child.exited())) throw new Error('a generator exited');
      await Bun.sleep(50);
    }
    for (const l of loaders) l.child.proc.kill('SIGUSR1');
    await Bun.sleep(WARMUP_MS);
    const cpu = cpuWindow(srv.pid);
    const l0 = loadavg()[0]!;
    await Bun.sleep(DURATION_MS);
    const c = cpu.end();
    const l1 = loadavg()[0]!;
    while (!loaders.every((l) => l.out().includes('COLLABJSON'))) await Bun.sleep(50);
    const res = loaders.map(
      (l) =>
        JSON.parse(/COLLABJSON (\{.*\})/.exec(l.out())![1]!) as {
          latencies: number[];
          seconds: number;
          errors: number;
        },
    );
    const delivered = res.reduce((n, r) => n + r.latencies.length, 0) / Math.max(...res.map((r) => r.seconds));
    const lat = res.flatMap((r) => r.latencies).sort((a, b) => a - b);
    const cores = c?.cores ?? NaN;
    return `| ${s.name} | ${delivered.toFixed(0)} | ${lat[Math.floor(lat.length * 0.99)]?.toFixed(2)} | ${cores.toFixed(3)} | ${((cores / delivered) * 1e6).toFixed(1)} | ${(delivered / cores).toFixed(0)} | ${l0.toFixed(1)}–${l1.toFixed(1)} |`;
  } finally {
    for (const l of loaders) await l.child.stop('SIGKILL', 0);
    await srv.stop('SIGTERM', 3_000);
  }
}

console.log(`${ROOMS} rooms × 2 editors × 5 updates/s, ${DURATION_MS / 1000} s measured after ${WARMUP_MS / 1000} s\n`);
console.log('| server | delivered/s | p99 ms | cores | µs CPU per update | updates per CPU-second | load average |');
console.log('|---|---:|---:|---:|---:|---:|---|');
for (let r = 0; r < rounds; r++) for (const s of servers) console.log(await once(s));
process.exit(0);
