import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/store/ports.ts';
import { cpuWindow, rssWindow, startChild, waitHttp, type Child } from './procs.ts';
import { seedProject, gql } from './seed.ts';
import { startService } from './targets.ts';

/**
 * `fanout-sse` and `fanout-ws` (issue 13): 10,000 subscribers of one channel on one gateway
 * process, writes at a steady rate through GraphQL, write-to-delivery latency across all
 * subscribers, deliveries per second and the gateway's peak RSS; beside each, the same number
 * of subscribers on a bare Bun.serve pub/sub relay (bench/references/relay.ts) relaying a
 * message of the same size — the ceiling. The load generator (bench/fanout-client.ts) is its
 * own process.
 */
export const FANOUT = ['fanout-sse', 'fanout-ws'] as const;
export type FanoutName = (typeof FANOUT)[number];

interface Measured {
  connected: number;
  failed: number;
  deliveries: number;
  expected: number;
  perSecond: number;
  p50: number;
  p99: number;
  rssMb: number | undefined;
  /** The server's own CPU (from /proc, so the load generators on the same box do not count) per delivered event, µs. */
  cpuUsPerDelivery?: number;
}

const ROOT = join(import.meta.dir, '..');

const CLIENTS = Number(process.env.BENCH_FANOUT_CLIENTS || 2);

/**
 * Starts the load generator processes, waits until every subscriber is live, makes the writes
 * from this process at the steady rate, then collects the arrival times of every process.
 */
async function drive(
  label: string,
  config: Record<string, unknown> & { subscribers: number; writes: number },
  ratePerSec: number,
  write: () => Promise<void>,
  server: Child,
): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  process.stderr.write(
    `bench: ${label} (${config.subscribers} subscribers over ${CLIENTS} client processes, ${config.writes} writes at ${ratePerSec}/s) … `,
  );
  const rss = rssWindow(server.pid);
  const clients = Array.from({ length: CLIENTS }, (_, i) => {
    const share = Math.floor(config.subscribers / CLIENTS) + (i < config.subscribers % CLIENTS ? 1 : 0);
    const file = join(dir, `client-${i}.json`);
    const out = join(dir, `arrivals-${i}.bin`);
    writeFileSync(file, JSON.stringify({ ...config, subscribers: share, out }));
    const child = startChild(process.execPath, [join(import.meta.dir, 'fanout-client.ts'), file], {
      label: `${label}-client`,
      cwd: ROOT,
    });
    let text = '';
    child.proc.stdout?.on('data', (c: Buffer) => (text += c.toString()));
    return { child, out, share, text: () => text };
  });
  try {
    const setupEnd = Date.now() + 180_000;
    while (!clients.every((c) => /READY \d+ \d+/.test(c.text()) || c.child.exited())) {
      if (Date.now() > setupEnd) throw new Error('subscribers did not connect within 180 s');
      await Bun.sleep(50);
    }
    let connected = 0;
    let failed = 0;
    for (const c of clients) {
      const m = /READY (\d+) (\d+)/.exec(c.text());
      if (!m) throw new Error(`a load generator failed: ${c.child.tail()}`);
      connected += Number(m[1]);
      failed += Number(m[2]);
    }
    await Bun.sleep(500);
    const cpu = cpuWindow(server.pid);
    const t0: number[] = [];
    const began = performance.now();
    for (let k = 0; k < config.writes; k++) {
      const wait = began + (k * 1000) / ratePerSec - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      t0.push(performance.timeOrigin + performance.now());
      await write();
    }
    const doneEnd = Date.now() + 15_000;
    while (!clients.every((c) => c.text().includes('DONE')) && Date.now() < doneEnd) await Bun.sleep(50);
    const used = cpu.end();
    for (const c of clients) await c.child.stop('SIGTERM', 10_000);
    const rssMb = rss.end();
    const latencies: number[] = [];
    let last = 0;
    for (const c of clients) {
      const arr = new Float64Array(readFileSync(c.out).buffer.slice(0));
      for (let i = 0; i < arr.length; i++) {
        const at = arr[i]!;
        if (Number.isNaN(at)) continue;
        latencies.push(at - t0[i % config.writes]!);
        if (at > last) last = at;
      }
    }
    latencies.sort((a, b) => a - b);
    const q = (p: number) =>
      latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]! : NaN;
    const seconds = (last - t0[0]!) / 1000;
    const r: Measured = {
      connected,
      failed,
      deliveries: latencies.length,
      expected: connected * config.writes,
      perSecond: latencies.length / seconds,
      p50: q(0.5),
      p99: q(0.99),
      rssMb,
      cpuUsPerDelivery: used && latencies.length ? (used.cpuSeconds * 1e6) / latencies.length : undefined,
    };
    process.stderr.write(
      `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.perSecond.toFixed(0)} deliveries/s\n`,
    );
    return r;
  } finally {
    for (const c of clients) await c.child.stop('SIGKILL', 0);
  }
}

export interface FanoutFigures {
  name: FanoutName;
  svc?: Measured;
  relay?: Measured;
  na?: string;
}

export async function runFanout(
  databaseUrl: string,
  names: readonly FanoutName[],
  quick: boolean,
): Promise<{ lines: string[]; notes: string[]; results: FanoutFigures[] }> {
  const subscribers = Number(process.env.BENCH_FANOUT_SUBSCRIBERS || 10_000);
  // 10,000 subscribers × 5 writes/s = 50,000 deliveries/s, which the 2-core bench box can
  // still receive; at higher rates the load generator, not the gateway, sets the latency.
  const ratePerSec = Number(process.env.BENCH_FANOUT_RATE || 5);
  const writes = Math.round(ratePerSec * (quick ? 3 : 10));
  const rport = await freePort();
  const svc = await startService(databaseUrl, {
    env: { REALTIME_PORT: String(rport), SVC_REALTIME_CONNECTIONS_PER_IDENTITY: String(subscribers * 2 + 10) },
  });
  const relayPort = await freePort();
  const relay = startChild(process.execPath, [join(import.meta.dir, 'references', 'relay.ts')], {
    label: 'relay',
    cwd: ROOT,
    env: { PORT: String(relayPort) },
  });
  const results: FanoutFigures[] = [];
  const notes: string[] = [];
  try {
    await waitHttp(`http://127.0.0.1:${relayPort}/health`, relay);
    const s = await seedProject(svc.url, svc.rootToken, databaseUrl);
    const create = JSON.stringify({ query: 'mutation { createNote(data: { title: "fan", slug: "fan" }) { _id } }' });
    // The relay carries a message of the size the gateway delivers for one record change.
    const sample = await gql(svc.url, s.secretKey, 'mutation { createNote(data: { title: "probe" }) { _id } }');
    const message = JSON.stringify({
      channel: 'changes:note',
      event: 'record.created',
      data: {
        modelKey: 'note',
        recordId: sample.data.createNote._id,
        action: 'created',
        userId: 'key_0123456789abcdef01234567',
      },
    });
    for (const name of names) {
      const mode = name === 'fanout-sse' ? 'sse' : 'ws';
      try {
        const base = { mode, host: '127.0.0.1', subscribers, writes };
        const post = (url: string, headers: Record<string, string>, body: string) => async () => {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...headers },
            body,
          });
          if (!res.ok) throw new Error(`write failed: HTTP ${res.status}`);
          await res.text();
        };
        const mine = await drive(
          name,
          {
            ...base,
            port: rport,
            path: mode === 'sse' ? `/sse/changes:note?apiKey=${s.publicKey}` : `/_events?apiKey=${s.publicKey}`,
            channel: mode === 'ws' ? 'changes:note' : undefined,
          },
          ratePerSec,
          post(`${svc.url}/graphql`, { 'x-api-key': s.secretKey }, create),
          svc.child,
        );
        const ref = await drive(
          `relay-${mode}`,
          {
            ...base,
            port: relayPort,
            path: mode === 'sse' ? '/sse' : '/ws',
          },
          ratePerSec,
          post(`http://127.0.0.1:${relayPort}/publish`, {}, message),
          relay,
        );
        results.push({ name, svc: mine, relay: ref });
        for (const [who, r] of [
          [name, mine],
          [`relay-${mode}`, ref],
        ] as const) {
          if (r.failed || r.connected < subscribers)
            notes.push(`${who}: ${r.connected} of ${subscribers} subscribers connected (${r.failed} failed)`);
          if (r.deliveries < r.expected) notes.push(`${who}: ${r.deliveries} of ${r.expected} deliveries arrived`);
        }
      } catch (err) {
        results.push({ name, na: (err as Error).message.split('\n')[0]!.slice(0, 160) });
      }
    }
  } finally {
    await svc.stop();
    await relay.stop('SIGTERM', 5_000);
  }
  const f = (n: number | undefined, d = 1) => (n === undefined || !Number.isFinite(n) ? 'n/a' : n.toFixed(d));
  const lines = [
    '## Fan-out (realtime)',
    '',
    `${subscribers.toLocaleString('en-US')} subscribers of one channel on one gateway process; ${writes} writes at ${ratePerSec}/s, one at a time (GraphQL \`createNote\` for the service, POST /publish for the relay). Latency is from the start of the write to each subscriber's delivery, over all deliveries. The subscribers are held by ${CLIENTS} load-generator processes (bench/fanout-client.ts) and the writes are made by the bench process; on this shared 2-core box their event loops are part of the latency on both sides. Target: p99 under 100 ms, RSS under 1 GiB.`,
    '',
    '| scenario | subscribers | deliveries/s | p50 ms | p99 ms | peak RSS MB | p99 × relay | deliveries/s ÷ relay | server CPU µs per delivery | × relay | subscribers per core at 5 events/s |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    if (!r.svc || !r.relay) {
      lines.push(`| ${r.name} | n/a (${r.na ?? 'not run'}) | | | | | | | | | |`);
      continue;
    }
    const mode = r.name === 'fanout-sse' ? 'sse' : 'ws';
    const perCore = (us: number | undefined) => (us ? f(1e6 / (us * ratePerSec), 0) : 'n/a');
    lines.push(
      `| relay-${mode} (reference) | ${r.relay.connected} | ${f(r.relay.perSecond, 0)} | ${f(r.relay.p50)} | ${f(r.relay.p99)} | ${f(r.relay.rssMb, 0)} | 1.00 | 1.00 | ${f(r.relay.cpuUsPerDelivery, 2)} | 1.00 | ${perCore(r.relay.cpuUsPerDelivery)} |`,
    );
    lines.push(
      `| ${r.name} | ${r.svc.connected} | ${f(r.svc.perSecond, 0)} | ${f(r.svc.p50)} | ${f(r.svc.p99)} | ${f(r.svc.rssMb, 0)} | ${f(r.svc.p99 / r.relay.p99, 2)} | ${f(r.svc.perSecond / r.relay.perSecond, 2)} | ${f(r.svc.cpuUsPerDelivery, 2)} | ${r.svc.cpuUsPerDelivery && r.relay.cpuUsPerDelivery ? f(r.svc.cpuUsPerDelivery / r.relay.cpuUsPerDelivery, 2) : 'n/a'} | ${perCore(r.svc.cpuUsPerDelivery)} |`,
    );
  }
  lines.push('');
  return { lines, notes, results };
}
