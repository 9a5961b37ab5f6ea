import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/store/ports.ts';
import { rssWindow, startChild, waitHttp, type Child } from './procs.ts';
import { seedProject } from './seed.ts';
import { startService } from './targets.ts';

/**
 * `fanout-3proc` (issue 21): one API process writing, three gateway processes each holding
 * `BENCH_FANOUT3_SUBSCRIBERS` (5,000) SSE subscribers of one project's channel, while the bus
 * also carries the traffic of many other projects (10,000 and 50,000 projects at one write per
 * ten seconds each, made by bench/bus-noise.ts straight onto the bus). Run on the PostgreSQL
 * bus and on the NATS bus in the same run: write→delivery latency over every delivery, and the
 * gateways' CPU. With NOTIFY every gateway hears every project's events; with NATS a gateway
 * subscribes only to the projects its clients watch.
 */
const ROOT = join(import.meta.dir, '..');
const GATEWAYS = 3;

interface Measured {
  bus: string;
  projects: number;
  noisePerSec: number;
  connected: number;
  deliveries: number;
  expected: number;
  p50: number;
  p99: number;
  gatewayCores: number;
  gatewayRssMb: number;
}

function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function gateway(
  databaseUrl: string,
  dataDir: string,
  rootToken: string,
  busUrl: string | undefined,
): Promise<{ child: Child; port: number }> {
  const [port, rport] = [await freePort(), await freePort()];
  const child = startChild(process.execPath, [join(ROOT, 'src', 'main.ts')], {
    label: 'gateway',
    cwd: ROOT,
    env: {
      DATABASE_URL: databaseUrl,
      SVC_DATA_DIR: dataDir,
      SVC_ROOT_TOKEN: rootToken,
      SVC_ROLE: 'gateway',
      PORT: String(port),
      REALTIME_PORT: String(rport),
      HOST: '127.0.0.1',
      SVC_LOG: 'off',
      SVC_BUS_URL: busUrl,
      SVC_REALTIME_CONNECTIONS_PER_IDENTITY: '100000',
    },
  });
  await waitHttp(`http://127.0.0.1:${rport}/health`, child);
  return { child, port: rport };
}

async function one(
  databaseUrl: string,
  bus: 'postgres' | 'nats',
  projects: number,
  opts: { subscribers: number; writes: number; rate: number },
): Promise<Measured> {
  const busUrl =
    bus === 'nats'
      ? `${process.env.BENCH_NATS_URL ?? 'nats://127.0.0.1:4222'}/b${Math.random().toString(36).slice(2, 8)}`
      : undefined;
  process.stderr.write(
    `bench: fanout-3proc ${bus}, ${projects} projects of traffic (${GATEWAYS} gateways × ${opts.subscribers} SSE subscribers, ${opts.writes} writes at ${opts.rate}/s) … `,
  );
  const api = await startService(databaseUrl, { env: { SVC_ROLE: 'api', SVC_LOG: 'off', SVC_BUS_URL: busUrl } });
  const gws: { child: Child; port: number }[] = [];
  const clients: { child: Child; out: string; text: () => string }[] = [];
  let noise: Child | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  try {
    for (let i = 0; i < GATEWAYS; i++) gws.push(await gateway(databaseUrl, api.dataDir, api.rootToken, busUrl));
    const s = await seedProject(api.url, api.rootToken, databaseUrl);
    for (const [i, g] of gws.entries()) {
      const file = join(dir, `client-${i}.json`);
      const out = join(dir, `arrivals-${i}.bin`);
      writeFileSync(
        file,
        JSON.stringify({
          mode: 'sse',
          host: '127.0.0.1',
          port: g.port,
          path: `/sse/changes:note?apiKey=${s.publicKey}`,
          subscribers: opts.subscribers,
          writes: opts.writes,
          out,
        }),
      );
      const child = startChild(process.execPath, [join(import.meta.dir, 'fanout-client.ts'), file], {
        label: 'fanout-client',
        cwd: ROOT,
      });
      let text = '';
      child.proc.stdout?.on('data', (c: Buffer) => (text += c.toString()));
      clients.push({ child, out, text: () => text });
    }
    const setupEnd = Date.now() + 180_000;
    while (!clients.every((c) => /READY \d+ \d+/.test(c.text()))) {
      if (Date.now() > setupEnd || clients.some((c) => c.child.exited()))
        throw new Error('subscribers did not connect');
      await Bun.sleep(50);
    }
    const connected = clients.reduce((n, c) => n + Number(/READY (\d+)/.exec(c.text())![1]), 0);
    // Other projects' writes: one per project every ten seconds, straight onto the bus.
    const noisePerSec = projects / 10;
    const noiseCfg = join(dir, 'noise.json');
    writeFileSync(noiseCfg, JSON.stringify({ databaseUrl, busUrl, projects, perSec: noisePerSec }));
    noise = startChild(process.execPath, [join(import.meta.dir, 'bus-noise.ts'), noiseCfg], {
      label: 'bus-noise',
      cwd: ROOT,
    });
    await Bun.sleep(2_000);
    const cpu0 = gws.map((g) => cpuSeconds(g.child.pid));
    const rss = gws.map((g) => rssWindow(g.child.pid));
    const wall0 = performance.now();
    const t0: number[] = [];
    const body = JSON.stringify({ query: 'mutation { createNote(data: { title: "fan", slug: "fan" }) { _id } }' });
    for (let k = 0; k < opts.writes; k++) {
      const wait = wall0 + (k * 1000) / opts.rate - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      t0.push(performance.timeOrigin + performance.now());
      const res = await fetch(`${api.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': s.secretKey },
        body,
      });
      if (!res.ok) throw new Error(`write failed: HTTP ${res.status}`);
      await res.text();
    }
    const doneEnd = Date.now() + 20_000;
    while (!clients.every((c) => c.text().includes('DONE')) && Date.now() < doneEnd) await Bun.sleep(50);
    const seconds = (performance.now() - wall0) / 1000;
    const gatewayCores = gws.reduce((n, g, i) => n + (cpuSeconds(g.child.pid) - cpu0[i]!), 0) / seconds / GATEWAYS;
    const gatewayRssMb = Math.max(...rss.map((r) => r.end() ?? 0));
    for (const c of clients) await c.child.stop('SIGTERM', 10_000);
    const latencies: number[] = [];
    for (const c of clients) {
      const arr = new Float64Array(readFileSync(c.out).buffer.slice(0));
      for (let i = 0; i < arr.length; i++) if (!Number.isNaN(arr[i]!)) latencies.push(arr[i]! - t0[i % opts.writes]!);
    }
    latencies.sort((a, b) => a - b);
    const q = (p: number) =>
      latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]! : NaN;
    const r: Measured = {
      bus,
      projects,
      noisePerSec,
      connected,
      deliveries: latencies.length,
      expected: connected * opts.writes,
      p50: q(0.5),
      p99: q(0.99),
      gatewayCores,
      gatewayRssMb,
    };
    process.stderr.write(
      `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.deliveries}/${r.expected} deliveries, gateway ${r.gatewayCores.toFixed(2)} cores each\n`,
    );
    return r;
  } finally {
    await noise?.stop('SIGTERM', 5_000);
    for (const c of clients) await c.child.stop('SIGKILL', 0);
    for (const g of gws) await g.child.stop('SIGTERM', 5_000);
    await api.stop();
  }
}

export async function runFanout3(databaseUrl: string, quick: boolean): Promise<string[]> {
  const subscribers = Number(process.env.BENCH_FANOUT3_SUBSCRIBERS || 5_000);
  const rate = Number(process.env.BENCH_FANOUT_RATE || 5);
  const opts = { subscribers, rate, writes: Math.round(rate * (quick ? 4 : 10)) };
  const rows: (Measured | { bus: string; projects: number; na: string })[] = [];
  for (const projects of [10_000, 50_000]) {
    for (const bus of ['postgres', 'nats'] as const) {
      try {
        rows.push(await one(databaseUrl, bus, projects, opts));
      } catch (err) {
        process.stderr.write('failed\n');
        rows.push({ bus, projects, na: (err as Error).message.split('\n')[0]!.slice(0, 160) });
      }
    }
  }
  const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
  const lines = [
    '## Fan-out across processes (`fanout-3proc`)',
    '',
    `One API process writing ${opts.rate} records/s to one project, three gateway processes each holding ${subscribers.toLocaleString('en-US')} SSE subscribers of its channel, while the bus also carries other projects' writes (one per project every 10 s, published straight onto the bus by bench/bus-noise.ts). Latency is write start → delivery over every delivery. Each bus is the other's reference, in the same run.`,
    '',
    '| bus | projects of traffic | other events/s | subscribers | deliveries | p50 ms | p99 ms | CPU per gateway (cores) | gateway peak RSS MB |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    if ('na' in r) lines.push(`| ${r.bus} | ${r.projects} | n/a (${r.na}) | | | | | | |`);
    else
      lines.push(
        `| ${r.bus} | ${r.projects.toLocaleString('en-US')} | ${f(r.noisePerSec, 0)} | ${r.connected} | ${r.deliveries}/${r.expected} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.gatewayCores, 2)} | ${f(r.gatewayRssMb, 0)} |`,
      );
  }
  lines.push('');
  return lines;
}
