import { mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '../src/store/db.ts';
import { insertApiKey } from '../src/auth/api-keys.ts';
import { freePort } from '../src/store/ports.ts';
import { cpuWindow, rssWindow, startChild, waitHttp, type Child } from './procs.ts';
import { seedProject, gql } from './seed.ts';
import { nodeForPeers, startService } from './targets.ts';
import { ensurePeers, peerFile, peerScript, peerVersion } from './peers.ts';
import { pgCpuWindow } from './pg-cpu.ts';

/**
 * Scenario `collab` (issue 14): ROOMS rooms × 2 editors, each typing RATE small updates per
 * second, against the service's gateway and, in the same run, the y-websocket server of the npm
 * registry (y-websocket 1.5.4's bin/server.js, installed by the bench into bench/.peers) under Node 22.
 * The load comes from bench/collab-load.ts in its own process. Reported beside the main table:
 * updates/s, update-to-peer p50/p99, server CPU (cores), peak RSS, and the service's saves/s.
 */
export interface CollabFigures {
  editors: number;
  updatesPerSecond: number;
  delivered: number;
  /** Updates that reached the peer within the window, per second: what the server got through. */
  deliveredPerSecond?: number;
  p50: number;
  p99: number;
  errors: number;
  /** Update frames the editors received after their initial sync (timed or not). */
  received?: number;
  firstError?: string;
  cores?: number;
  rssMb?: number;
  savesPerSecond?: number;
  /** Cores each load generator kept busy over the window: near 1 means it was the bottleneck. */
  loaderCores?: number[];
  /** Cores PostgreSQL's backends on the bench database kept busy over the window. */
  pgCores?: number;
  /** 1-minute load average at the start and the end of the measured window. */
  load?: [number, number];
}

const ROOMS = Number(process.env.BENCH_COLLAB_ROOMS || 1000);
const RATE = 5;
const KEY_ROOMS = 10;
/** Load generator processes (each holds whole rooms, so both editors of a room share a clock). */
const LOADERS = Math.max(1, Number(process.env.BENCH_COLLAB_LOADERS || 2));
/** Also run the rooms with their two editors on two service processes (`BENCH_COLLAB_TWO=0` skips it). */
const TWO_PROCESSES = process.env.BENCH_COLLAB_TWO !== '0';

interface LoaderResult {
  editors: number;
  sent: number;
  received: number;
  seconds: number;
  errors: number;
  firstError?: string;
  latencies: number[];
}

async function drive(
  urls: (string | [string, string])[],
  servers: Child[],
  quick: boolean,
  databaseUrl?: string,
  hocuspocusToken?: string,
): Promise<CollabFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const warmupMs = quick ? 3_000 : 5_000;
  const durationMs = Number(process.env.BENCH_DURATION || (quick ? 5 : 15)) * 1000;
  const per = Math.ceil(urls.length / LOADERS);
  const loaders = Array.from({ length: Math.ceil(urls.length / per) }, (_, i) => {
    const file = join(dir, `collab-${i}.json`);
    writeFileSync(
      file,
      JSON.stringify({ urls: urls.slice(i * per, (i + 1) * per), rate: RATE, warmupMs, durationMs, hocuspocusToken }),
    );
    const child = startChild(process.execPath, [join(import.meta.dir, 'collab-load.ts'), file], {
      label: `collab-load-${i}`,
      cwd: join(import.meta.dir, '..'),
    });
    let out = '';
    child.proc.stdout?.on('data', (c: Buffer) => void (out += c.toString()));
    const ended = new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
    return { child, out: () => out, ended };
  });
  const killer = setTimeout(() => void Promise.all(loaders.map((l) => l.child.stop('SIGKILL', 0))), 300_000);
  try {
    // Every generator connected (or one died) before anyone types.
    const ready = () => loaders.every((l) => l.out().includes('COLLABREADY'));
    while (!ready()) {
      const dead = loaders.find((l) => l.child.exited());
      if (dead) throw new Error(`collab load exited before it was ready: ${dead.child.tail()}`);
      await Bun.sleep(50);
    }
    for (const l of loaders) l.child.proc.kill('SIGUSR1');
    await Bun.sleep(warmupMs);
    // Server and generator CPU, server peak RSS, over the measured window only.
    const cpu = servers.map((x) => cpuWindow(x.pid));
    const rss = servers.map((x) => rssWindow(x.pid));
    const loaderCpu = loaders.map((l) => cpuWindow(l.child.pid));
    // PostgreSQL's backends on the bench database (the service's saves and relay; not the reference's).
    const pg = databaseUrl ? await pgCpuWindow(databaseUrl).catch(() => undefined) : undefined;
    const pgStart = performance.now();
    const load0 = loadavg()[0]!;
    await Bun.sleep(durationMs);
    // Cores summed over the server's processes; peak RSS of the largest.
    const cores = cpu.map((c) => c.end()?.cores);
    const used = cores.every((c) => c !== undefined) ? { cores: cores.reduce((a, b) => a! + b!, 0)! } : undefined;
    const peaks = rss.map((r) => r.end() ?? 0);
    const peak = Math.max(...peaks) || undefined;
    const loaderCores = loaderCpu.map((c) => c.end()?.cores ?? NaN);
    const pgSeconds = pg ? await pg.end() : undefined;
    const pgCores = pgSeconds === undefined ? undefined : pgSeconds / ((performance.now() - pgStart) / 1000);
    const load1 = loadavg()[0]!;
    await Promise.all(loaders.map((l) => l.ended));
    const results = loaders.map((l) => {
      const m = /COLLABJSON (\{.*\})/.exec(l.out());
      if (!m) throw new Error(`collab load printed no result: ${l.child.tail()}`);
      return JSON.parse(m[1]!) as LoaderResult;
    });
    const latencies = results.flatMap((r) => r.latencies).sort((x, y) => x - y);
    const q = (p: number) =>
      latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]! : NaN;
    const seconds = Math.max(...results.map((r) => r.seconds));
    return {
      editors: results.reduce((n, r) => n + r.editors, 0),
      updatesPerSecond: results.reduce((n, r) => n + r.sent, 0) / seconds,
      delivered: latencies.length,
      deliveredPerSecond: latencies.length / seconds,
      p50: q(0.5),
      p99: q(0.99),
      errors: results.reduce((n, r) => n + r.errors, 0),
      received: results.reduce((n, r) => n + r.received, 0),
      firstError: results.find((r) => r.firstError)?.firstError,
      cores: used?.cores,
      rssMb: peak,
      loaderCores,
      pgCores,
      load: [load0, load1],
    };
  } finally {
    clearTimeout(killer);
    await Promise.all(loaders.map((l) => l.child.stop('SIGKILL', 0)));
  }
}

export async function runCollab(
  databaseUrl: string,
  quick: boolean,
  profile?: string,
): Promise<{
  service: CollabFigures | string;
  reference: CollabFigures | string;
  hocuspocus: CollabFigures | string;
  twoProcesses?: CollabFigures | string;
  profile?: string;
}> {
  let service: CollabFigures | string;
  let reference: CollabFigures | string;
  let hocuspocus: CollabFigures | string = 'not run';
  let twoProcesses: CollabFigures | string | undefined;
  const svc = await startService(databaseUrl, { profile });
  const profileFile = svc.profile;
  try {
    const s = await seedProject(svc.url, svc.rootToken, databaseUrl);
    const sql = connect(databaseUrl, { max: 4 });
    try {
      const keys: string[] = [];
      for (let i = 0; i < Math.ceil(ROOMS / KEY_ROOMS); i++) {
        keys.push(
          (
            await insertApiKey(sql, {
              tenantId: s.tenantId,
              projectId: s.projectId,
              kind: 'sk',
              name: `collab-${i}`,
              scopes: ['records:read', 'records:write', 'drafts:read'],
              rateLimit: 1_000_000_000,
            })
          ).key,
        );
      }
      const ids: string[] = [];
      for (let i = 0; i < ROOMS; i += 16) {
        const batch = Array.from({ length: Math.min(16, ROOMS - i) }, (_, j) =>
          gql(svc.url, s.secretKey, 'mutation($d: PadInput!) { createPad(data: $d) { _id } }', {
            d: { title: `pad ${i + j}`, body: '' },
          }),
        );
        for (const r of await Promise.all(batch)) ids.push(r.data.createPad._id as string);
      }
      const ws = svc.gatewayUrl.replace(/^http/, 'ws');
      const urls = ids.map((id, i) => `${ws}/pad:${id}:default?apiKey=${keys[Math.floor(i / KEY_ROOMS)]}`);
      const count = async () =>
        Number((await sql`select count(*)::int as n from record_versions where action = 'updated'`)[0]!.n);
      process.stderr.write(`bench: collab (${ROOMS} rooms × 2 editors, ${RATE} updates/s each) … `);
      const before = await count();
      const t0 = performance.now();
      const f = await drive(urls, [svc.child], quick, databaseUrl);
      // Saves of the last keystrokes land up to the debounce (2 s) after the load stops.
      await Bun.sleep(2_500);
      const saves = (await count()) - before;
      f.savesPerSecond = saves / ((performance.now() - t0) / 1000);
      service = f;
      process.stderr.write(
        `${num(f.updatesPerSecond, 0)} updates/s, p99 ${num(f.p99, 1)} ms, ${f.delivered} delivered, ${f.errors} closed${f.firstError ? ` (${f.firstError})` : ''}\n`,
      );
      if (TWO_PROCESSES) {
        // The same rooms with each room's two editors on two service processes: every update
        // crosses PostgreSQL (relay rows + NOTIFY, in batches).
        const svc2 = await startService(databaseUrl, {});
        try {
          const ws2 = svc2.gatewayUrl.replace(/^http/, 'ws');
          const pairs = urls.map((u): [string, string] => [u, u.replace(ws, ws2)]);
          process.stderr.write(`bench: collab on 2 service processes (each room's editors on both) … `);
          const g = await drive(pairs, [svc.child, svc2.child], quick, databaseUrl);
          twoProcesses = g;
          process.stderr.write(
            `${num(g.updatesPerSecond, 0)} updates/s, p99 ${num(g.p99, 1)} ms, ${g.delivered} delivered (${g.received} frames received), ${g.errors} closed${g.firstError ? ` (${g.firstError})` : ''}\n`,
          );
        } catch (err) {
          twoProcesses = (err as Error).message.split('\n')[0]!.slice(0, 160);
        } finally {
          await svc2.stop();
        }
      }
    } finally {
      await sql.end({ timeout: 2 });
    }
  } catch (err) {
    service = (err as Error).message.split('\n')[0]!.slice(0, 160);
  } finally {
    await svc.stop();
  }
  const node = nodeForPeers();
  if (!node) reference = ensurePeers() ?? 'no Node to run y-websocket on';
  else {
    const port = await freePort();
    const ref = startChild(node, [peerFile('y-websocket', 'bin', 'server.js')], {
      label: 'y-websocket',
      env: { PORT: String(port), HOST: '127.0.0.1' },
    });
    try {
      await waitHttp(`http://127.0.0.1:${port}/`, ref);
      process.stderr.write(`bench: collab reference y-websocket ${peerVersion('y-websocket')} server under Node 22 … `);
      const urls = Array.from({ length: ROOMS }, (_, i) => `ws://127.0.0.1:${port}/pad-${i}`);
      const f = await drive(urls, [ref], quick);
      reference = f;
      process.stderr.write(
        `${num(f.updatesPerSecond, 0)} updates/s, p99 ${num(f.p99, 1)} ms, ${f.delivered} delivered, ${f.errors} closed${f.firstError ? ` (${f.firstError})` : ''}\n`,
      );
    } catch (err) {
      reference = (err as Error).message.split('\n')[0]!.slice(0, 160);
    } finally {
      await ref.stop('SIGTERM', 5_000);
    }
  }
  if (node) hocuspocus = await runHocuspocus(node, databaseUrl, quick);
  return { service, reference, hocuspocus, twoProcesses, profile: profileFile };
}

/**
 * The Hocuspocus peer (bench/references/hocuspocus.mjs) under the same load, its database
 * extension saving to the bench database: PostgreSQL's backends are counted as for the service.
 */
async function runHocuspocus(node: string, databaseUrl: string, quick: boolean): Promise<CollabFigures | string> {
  const port = await freePort();
  const token = `hp_${crypto.randomUUID()}`;
  const hp = startChild(node, [peerScript('hocuspocus.mjs')], {
    label: 'hocuspocus',
    env: { PORT: String(port), BENCH_DATABASE_URL: databaseUrl, BENCH_TOKEN: token },
  });
  try {
    await waitHttp(`http://127.0.0.1:${port}/`, hp, 60_000);
    process.stderr.write(
      `bench: collab peer Hocuspocus ${peerVersion('@hocuspocus/server')} (database extension on the bench database, auth hook) under Node 22 … `,
    );
    const urls = Array.from({ length: ROOMS }, (_, i) => `ws://127.0.0.1:${port}/pad-${i}`);
    const f = await drive(urls, [hp], quick, databaseUrl, token);
    process.stderr.write(
      `${num(f.updatesPerSecond, 0)} updates/s, p99 ${num(f.p99, 1)} ms, ${f.delivered} delivered, ${f.errors} closed${f.firstError ? ` (${f.firstError})` : ''}\n`,
    );
    return f;
  } catch (err) {
    process.stderr.write('failed\n');
    return (err as Error).message.split('\n')[0]!.slice(0, 160);
  } finally {
    await hp.stop('SIGTERM', 5_000);
  }
}

const num = (n: number | null | undefined, digits: number) =>
  typeof n === 'number' && Number.isFinite(n) ? n.toFixed(digits) : 'n/a';

/** The `## Collaboration` section of the results. */
export function collabLines(r: {
  service: CollabFigures | string;
  reference: CollabFigures | string;
  hocuspocus?: CollabFigures | string;
  twoProcesses?: CollabFigures | string;
}): string[] {
  // Per update the server got through (delivered), not per update offered: a server that falls
  // behind would otherwise be credited with updates still waiting in its socket buffers.
  const perCpu = (f: CollabFigures) => (f.cores ? (f.deliveredPerSecond ?? f.updatesPerSecond) / f.cores : NaN);
  const row = (name: string, f: CollabFigures | string) =>
    typeof f === 'string'
      ? `| ${name} | n/a (${f.replace(/\|/g, '/')}) | | | | | | | | | | |`
      : `| ${name} | ${f.editors} | ${num(f.updatesPerSecond, 0)} / ${num(f.deliveredPerSecond, 0)} | ${num(f.p50, 2)} | ${num(f.p99, 2)} | ${f.cores?.toFixed(2) ?? 'n/a'} | ${num(perCpu(f), 0)} | ${f.rssMb?.toFixed(0) ?? 'n/a'} | ${f.savesPerSecond === undefined ? '' : f.savesPerSecond.toFixed(1)} | ${f.pgCores === undefined ? '' : num(f.pgCores, 2)} | ${(f.loaderCores ?? []).map((c) => num(c, 2)).join(' + ')} | ${f.load ? `${num(f.load[0], 1)}–${num(f.load[1], 1)}` : ''} |`;
  const lines = [
    '## Collaboration (`collab`)',
    '',
    `${ROOMS} rooms × 2 editors, ${RATE} updates/s each (bench/collab-load.ts in ${LOADERS} processes, each holding whole rooms). Latency: an editor's update until the room's other editor's socket receives it. Server CPU and updates per CPU-second count the server process only (not PostgreSQL, which the service's saves use and the reference does not).`,
    '',
    '| server | editors | updates/s sent / delivered | p50 ms | p99 ms | server CPU (cores) | delivered updates per CPU-second | peak RSS MB | saves/s | PostgreSQL cores | generator cores | load average |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
    row('svc gateway', r.service),
    row(`y-websocket ${peerVersion('y-websocket')} server (Node 22)`, r.reference),
    ...(r.hocuspocus === undefined
      ? []
      : [row(`Hocuspocus ${peerVersion('@hocuspocus/server')} + database extension (Node 22)`, r.hocuspocus)]),
    ...(r.twoProcesses === undefined
      ? []
      : [row('svc, 2 processes (editors split; cores summed, RSS of the larger)', r.twoProcesses)]),
  ];
  const s = r.service;
  const ref = r.reference;
  if (typeof s !== 'string' && typeof ref !== 'string' && s.cores && ref.cores) {
    lines.push(
      '',
      `Updates per CPU-second: svc ${perCpu(s).toFixed(0)}, reference ${perCpu(ref).toFixed(0)} (× ${(perCpu(s) / perCpu(ref)).toFixed(2)}). The load is fixed (both servers get the same offered rate), so throughput is compared per core.`,
    );
  }
  for (const [n, f] of [
    ['svc', s],
    ['reference', ref],
  ] as const)
    if (typeof f !== 'string' && f.errors > 0)
      lines.push('', `${n}: ${f.errors} sockets closed during the run (first: ${f.firstError})`);
  lines.push('');
  return lines;
}

/**
 * The collaboration figures for the result file: delivered updates per CPU-second of the server
 * alone and of the server plus PostgreSQL's backends (the service saves rooms there; a peer that
 * persists, such as Hocuspocus with its database extension, is counted the same way), p99, and
 * PostgreSQL CPU per room save.
 */
export function collabFigures(r: {
  service: CollabFigures | string;
  reference: CollabFigures | string;
  hocuspocus?: CollabFigures | string;
}): Record<string, { value: number; unit: string; errors?: number }> {
  const out: Record<string, { value: number; unit: string; errors?: number }> = {};
  for (const [name, f] of [
    ['collab', r.service],
    ['y-websocket', r.reference],
    ['hocuspocus', r.hocuspocus ?? 'not run'],
  ] as const) {
    if (typeof f === 'string' || !f.cores) continue;
    const delivered = f.deliveredPerSecond ?? f.updatesPerSecond;
    // Honest counting: closed sockets are errors, and so are updates that did not reach the peer
    // within the window (a server lagging seconds behind must not read as a cheap one).
    const lost = delivered < 0.9 * f.updatesPerSecond ? Math.round(f.updatesPerSecond - delivered) : 0;
    const errors = f.errors + lost;
    out[`${name}/updates-per-cpu-second`] = { value: delivered / f.cores, unit: 'updates/CPU-s', errors };
    out[`${name}/updates-per-cpu-second-with-pg`] = {
      value: delivered / (f.cores + (f.pgCores ?? 0)),
      unit: 'updates/CPU-s',
      errors,
    };
    if (Number.isFinite(f.p99)) out[`${name}/p99`] = { value: f.p99, unit: 'ms', errors };
    // /proc counts CPU in 10 ms ticks: no tick in the window is no measurement, not 0 ms.
    if (f.savesPerSecond && f.pgCores)
      out[`${name}/pg-ms-per-save`] = { value: (1000 * f.pgCores) / f.savesPerSecond, unit: 'ms', errors };
  }
  return out;
}
