import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../src/store/ports.ts';
import { rssWindow, startChild, waitHttp } from './procs.ts';
import type { Row } from './report.ts';
import { gql, type Seeded } from './seed.ts';
import type { Target } from './targets.ts';

/**
 * Scenario `operations` (issue 15): 2,000 executions of an operation whose endpoint answers at
 * once, driven by bench/operations.ts in its own process; reference in the same run: the same
 * number of direct Bun HTTP calls to that endpoint (the ceiling). Row `operations`: executions/s
 * from the first mutation to the last `job.completed` event, p50/p99 = dispatch latency
 * (mutation sent → endpoint received the call). Row `operations/direct`: calls/s and latency.
 */
const COUNT = Number(process.env.BENCH_OPERATIONS || 2000);

export async function runOperations(svc: Target & { gatewayUrl: string }, s: Seeded): Promise<{ rows: Row[]; notes: string[] }> {
  process.stderr.write(`bench: operations (${COUNT} executions, bench/operations.ts) … `);
  const port = await freePort();
  const ep = startChild(process.execPath, [join(import.meta.dir, 'references', 'op-endpoint.ts')], { label: 'op-endpoint', env: { PORT: String(port) } });
  try {
    await waitHttp(`http://127.0.0.1:${port}/`, ep);
    const endpoint = `http://127.0.0.1:${port}/op`;
    const res = await fetch(`${svc.url}/v1/control/projects/${s.projectId}/config`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ config: { key: 'bench-operations', name: 'bench operations', operations: [{ key: 'bench', endpoint }] } }),
    });
    if (res.status !== 200) throw new Error(`config push of the bench operation: HTTP ${res.status} ${(await res.text()).slice(0, 120)}`);
    // Preflight: one execution must complete.
    const first = await gql(svc.url, s.secretKey, 'mutation { executeOperation(key: "bench") { id } }');
    const id = first.data.executeOperation.id as string;
    const end = Date.now() + 30_000;
    for (;;) {
      const r = await gql(svc.url, s.secretKey, 'query($id: String!) { operationExecution(id: $id) { status } }', { id });
      if (r.data.operationExecution?.status === 'completed') break;
      if (Date.now() > end) throw new Error(`preflight execution stayed ${r.data.operationExecution?.status}`);
      await Bun.sleep(50);
    }
    await fetch(`http://127.0.0.1:${port}/`);
    const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'operations.json');
    const connections = Number(process.env.BENCH_CONNECTIONS || 32);
    writeFileSync(file, JSON.stringify({ graphql: svc.endpoint, sse: svc.gatewayUrl, apiKey: s.secretKey, endpoint, count: COUNT, connections }));
    const rss = rssWindow(svc.child.pid);
    const driver = startChild(process.execPath, [join(import.meta.dir, 'operations.ts'), file], { label: 'operations' });
    let out = '';
    driver.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => void driver.stop('SIGKILL', 0), 300_000);
    await new Promise<void>((r) => (driver.exited() ? r() : driver.proc.once('exit', () => r())));
    clearTimeout(timer);
    const rssMb = rss.end();
    const m = /OPSJSON (\{.*\})/.exec(out);
    if (!m) throw new Error(`bench/operations.ts printed no result: ${driver.tail()}`);
    const r = JSON.parse(m[1]!);
    process.stderr.write(`${r.service.rps.toFixed(0)} executions/s (direct calls: ${r.direct.rps.toFixed(0)}/s)\n`);
    const notes = [
      `operations: ${COUNT} executions, ${connections} concurrent mutations, endpoint answering at once; ${r.service.rps.toFixed(0)} executions/s from mutation to job.completed (SSE jobs:*) = ${(r.service.rps / r.direct.rps).toFixed(3)} × direct Bun calls to the endpoint (${r.direct.rps.toFixed(0)}/s); p50/p99 of the row = dispatch latency (mutation sent → endpoint received); mutation → job.completed p50 ${r.e2e.p50.toFixed(1)} ms, p99 ${r.e2e.p99.toFixed(1)} ms; per-project concurrency cap SVC_OPERATIONS_CONCURRENCY default 32`,
    ];
    if (r.service.errors) notes.push(`operations: ${r.service.errors} executions failed or were not seen completing${r.service.firstError ? ` (first: ${r.service.firstError})` : ''}`);
    return {
      notes,
      rows: [
        { name: 'operations/direct', shape: 'operations', reference: true, result: { ...r.direct, rssMb: undefined } },
        { name: 'operations', shape: 'operations', reference: false, result: { ...r.service, rssMb } },
      ],
    };
  } finally {
    await ep.stop();
  }
}
