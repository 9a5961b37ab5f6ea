import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/store/ports.ts';
import { cpuWindow, rssWindow, startChild, waitHttp } from './procs.ts';
import { pgCpuWindow } from './pg-cpu.ts';
import { ensurePeers, peerScript, peerVersion } from './peers.ts';
import type { LoadResult } from './load.ts';
import type { Row } from './report.ts';
import { gql, type Seeded } from './seed.ts';
import { nodeForPeers, type Target } from './targets.ts';

/**
 * Scenario `operations` (issue 15): 2,000 executions of an operation whose endpoint answers at
 * once, driven by bench/operations.ts in its own process; reference in the same run: the same
 * number of direct Bun HTTP calls to that endpoint (the ceiling). Row `operations`: executions/s
 * from the first mutation to the last `job.completed` event, p50/p99 = dispatch latency
 * (mutation sent → endpoint received the call). Row `operations/direct`: calls/s and latency.
 */
const COUNT = Number(process.env.BENCH_OPERATIONS || 2000);

export async function runOperations(
  svc: Target & { gatewayUrl: string },
  s: Seeded,
  databaseUrl: string,
): Promise<{ rows: Row[]; notes: string[] }> {
  process.stderr.write(`bench: operations (${COUNT} executions, bench/operations.ts) … `);
  const port = await freePort();
  const ep = startChild(process.execPath, [join(import.meta.dir, 'references', 'op-endpoint.ts')], {
    label: 'op-endpoint',
    env: { PORT: String(port) },
  });
  try {
    await waitHttp(`http://127.0.0.1:${port}/`, ep);
    const endpoint = `http://127.0.0.1:${port}/op`;
    const res = await fetch(`${svc.url}/v1/control/projects/${s.projectId}/config`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        config: { key: 'bench-operations', name: 'bench operations', operations: [{ key: 'bench', endpoint }] },
      }),
    });
    if (res.status !== 200)
      throw new Error(`config push of the bench operation: HTTP ${res.status} ${(await res.text()).slice(0, 120)}`);
    // Preflight: one execution must complete.
    const first = await gql(svc.url, s.secretKey, 'mutation { executeOperation(key: "bench") { id } }');
    const id = first.data.executeOperation.id as string;
    const end = Date.now() + 30_000;
    for (;;) {
      const r = await gql(svc.url, s.secretKey, 'query($id: String!) { operationExecution(id: $id) { status } }', {
        id,
      });
      if (r.data.operationExecution?.status === 'completed') break;
      if (Date.now() > end) throw new Error(`preflight execution stayed ${r.data.operationExecution?.status}`);
      await Bun.sleep(50);
    }
    await fetch(`http://127.0.0.1:${port}/`);
    const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'operations.json');
    const connections = Number(process.env.BENCH_CONNECTIONS || 32);
    writeFileSync(
      file,
      JSON.stringify({
        graphql: svc.endpoint,
        sse: svc.gatewayUrl,
        apiKey: s.secretKey,
        endpoint,
        count: COUNT,
        connections,
      }),
    );
    const rss = rssWindow(svc.child.pid);
    const cpu = cpuWindow(svc.child.pid);
    const pg = await pgCpuWindow(databaseUrl).catch(() => undefined);
    const driver = startChild(process.execPath, [join(import.meta.dir, 'operations.ts'), file], {
      label: 'operations',
    });
    let out = '';
    driver.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => void driver.stop('SIGKILL', 0), 300_000);
    await new Promise<void>((r) => (driver.exited() ? r() : driver.proc.once('exit', () => r())));
    clearTimeout(timer);
    const rssMb = rss.end();
    const used = cpu.end();
    const pgSeconds = await pg?.end();
    const m = /OPSJSON (\{.*\})/.exec(out);
    if (!m) throw new Error(`bench/operations.ts printed no result: ${driver.tail()}`);
    const r = JSON.parse(m[1]!);
    process.stderr.write(`${r.service.rps.toFixed(0)} executions/s (direct calls: ${r.direct.rps.toFixed(0)}/s)\n`);
    const notes = [
      `operations: ${COUNT} executions, ${connections} concurrent mutations, endpoint answering at once; ${r.service.rps.toFixed(0)} executions/s from mutation to job.completed (SSE jobs:*) = ${(r.service.rps / r.direct.rps).toFixed(3)} × direct Bun calls to the endpoint (${r.direct.rps.toFixed(0)}/s); p50/p99 of the row = dispatch latency (mutation sent → endpoint received); mutation → job.completed p50 ${r.e2e.p50.toFixed(1)} ms, p99 ${r.e2e.p99.toFixed(1)} ms; per-project concurrency cap SVC_OPERATIONS_CONCURRENCY default 32`,
    ];
    if (used)
      notes.push(
        `operations: service CPU ${((used.cpuSeconds * 1e6) / COUNT).toFixed(0)} µs per execution${pgSeconds !== undefined ? ` + PostgreSQL backends ${((pgSeconds * 1e6) / COUNT).toFixed(0)} µs` : ''} (over the whole run: mutations, dispatch, SSE)`,
      );
    const peer = await runGraphileWorker(databaseUrl, endpoint, connections);
    notes.push(...peer.notes);
    if (r.service.errors)
      notes.push(
        `operations: ${r.service.errors} executions failed or were not seen completing${r.service.firstError ? ` (first: ${r.service.firstError})` : ''}`,
      );
    return {
      notes,
      rows: [
        { name: 'operations/direct', shape: 'operations', reference: true, result: { ...r.direct, rssMb: undefined } },
        { name: 'operations', shape: 'operations', reference: false, result: { ...r.service, rssMb } },
        peer.row,
      ],
    };
  } finally {
    await ep.stop();
  }
}

/**
 * The peer: graphile-worker on Node 22 (bench/references/graphile-worker.mjs) on the same
 * database, the same number of jobs, each calling the same endpoint.
 */
async function runGraphileWorker(
  databaseUrl: string,
  endpoint: string,
  connections: number,
): Promise<{ row: Row; notes: string[] }> {
  const name = 'graphile-worker';
  const node = nodeForPeers();
  if (!node)
    return { row: { name, shape: 'operations', reference: true, na: ensurePeers() ?? 'no Node 22' }, notes: [] };
  process.stderr.write(
    `bench: operations peer graphile-worker ${peerVersion('graphile-worker')} (${COUNT} jobs, Node 22) … `,
  );
  const pg = await pgCpuWindow(databaseUrl).catch(() => undefined);
  const gw = startChild(node, [peerScript('graphile-worker.mjs')], {
    label: name,
    env: {
      BENCH_DATABASE_URL: databaseUrl,
      BENCH_ENDPOINT: endpoint,
      BENCH_COUNT: String(COUNT),
      BENCH_CONNECTIONS: String(connections),
    },
  });
  let out = '';
  gw.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void gw.stop('SIGKILL', 0), 300_000);
  await new Promise<void>((r) => (gw.exited() ? r() : gw.proc.once('exit', () => r())));
  clearTimeout(timer);
  const pgSeconds = await pg?.end();
  const m = /GWJSON (\{.*\})/.exec(out);
  if (!m) {
    process.stderr.write('failed\n');
    return {
      row: {
        name,
        shape: 'operations',
        reference: true,
        na: `printed no result: ${gw.tail().split('\n').pop()?.slice(0, 120)}`,
      },
      notes: [],
    };
  }
  const r = JSON.parse(m[1]!) as LoadResult & { cpuUsPerJob: number };
  process.stderr.write(`${r.rps.toFixed(0)} jobs/s\n`);
  return {
    row: { name, shape: 'operations', reference: true, result: { ...r, rssMb: undefined } },
    notes: [
      `graphile-worker: ${r.requests} jobs (each one POST to the same endpoint), concurrency ${connections}, added ${connections} at a time: ${r.rps.toFixed(0)} jobs/s, add → endpoint p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms; its process CPU ${r.cpuUsPerJob.toFixed(0)} µs per job (adding included)${pgSeconds !== undefined ? `; PostgreSQL backends ${((pgSeconds * 1e6) / COUNT).toFixed(0)} µs per job (warm-up batch included)` : ''}`,
    ],
  };
}
