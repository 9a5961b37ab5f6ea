/**
 * The `write` scenario's company: the bare-INSERT ceiling (bench/references/write-ceiling.ts) and
 * the PostGraphile write peer measured right after the service's pairs, the notes comparing them,
 * and `svc records import` of a generated file.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/main.ts';
import { createWritePeerTable } from './database.ts';
import type { LoadPlan, LoadResult } from './load.ts';
import { measure, naRow } from './measure.ts';
import { planFor, type Options } from './options.ts';
import { pgCpuWindow } from './pg-cpu.ts';
import { childResult, startScript } from './procs.ts';
import { state } from './state.ts';
import { startReference, type Target } from './targets.ts';

/** bench/references/write-ceiling.ts as its own process, with the write scenario's plan. */
export async function runWriteCeiling(plan: LoadPlan): Promise<void> {
  process.stderr.write(
    `bench: write-ceiling (bare INSERT commits from Bun.SQL, ${plan.connections} connections, ${plan.durationMs / 1000} s) … `,
  );
  const input = {
    databaseUrl: state.db!.url,
    connections: plan.connections,
    warmupMs: plan.warmupMs,
    durationMs: plan.durationMs,
  };
  const child = startScript(join('references', 'write-ceiling.ts'), input, 'write-ceiling');
  const pg = await pgCpuWindow(state.db!.url).catch(() => undefined);
  const r = await childResult<LoadResult & { cpuSeconds?: number }>(
    child,
    'LOADJSON',
    plan.warmupMs + plan.durationMs + 60_000,
  );
  const pgSeconds = await pg?.end();
  if (!r) {
    naRow('write-ceiling', 'write', true, `printed no result: ${child.tail()}`);
    process.stderr.write('failed\n');
    return;
  }
  if (r.cpuSeconds !== undefined && pgSeconds !== undefined && r.rps > 0) {
    // The client's whole life (setup, warm-up, run; it reports its own CPU) against operations
    // at the measured rate over warm-up and run.
    const ops = (r.rps * (plan.warmupMs + plan.durationMs)) / 1000;
    state.writeCpu.set('write-ceiling', { client: (r.cpuSeconds * 1e6) / ops, pg: (pgSeconds * 1e6) / ops });
  }
  state.rows.push({ name: 'write-ceiling', shape: 'write', reference: true, result: { ...r, rssMb: undefined } });
  process.stderr.write(`${r.rps.toFixed(0)} commits/s\n`);
}

/**
 * The write peer (issue 11): PostGraphile 5 on Node 22 over `bench_ref.note` in the same
 * database, the same load generator and connections — GraphQL mutations over HTTP, each its own
 * commit — beside the service's pairs and creates. PostGraphile writes one row per mutation;
 * the service writes the record, its draft (and published) content and a version row, and
 * announces the change through the outbox, so this is the peer's work, not the same work.
 */
export async function runWritePeer(o: Options): Promise<void> {
  let peer: Target | undefined;
  try {
    await createWritePeerTable(state.db!.url);
    peer = await startReference('postgraphile', { databaseUrl: state.db!.url });
    await measure('postgraphile/write', 'write', true, peer, planFor(o, peer.endpoint, undefined, [{}], 'peer-write'));
    await measure(
      'postgraphile/create',
      'write',
      true,
      peer,
      planFor(o, peer.endpoint, undefined, [{}], 'peer-create'),
    );
  } catch (err) {
    for (const n of ['postgraphile/write', 'postgraphile/create'])
      if (!state.rows.some((r) => r.name === n)) naRow(n, 'write', true, (err as Error).message);
  } finally {
    await peer?.stop();
  }
}

/** Records per second of the bulk paths, from the rows just measured. */
export function writeNotes(): void {
  const rps = (n: string) => state.rows.find((r) => r.name === n)?.result?.rps;
  const single = rps('write/create');
  const batch = rps('write/batch100');
  const ceiling = rps('write-ceiling');
  const pairs = rps('write');
  if (pairs && ceiling)
    state.notes.push(
      `write: ${pairs.toFixed(0)} create+publish pairs/s = ${(pairs / ceiling).toFixed(3)} × write-ceiling (${ceiling.toFixed(0)} bare INSERT commits/s, same connections, same run); targets ≥ 0.4 (at least 0.25)`,
    );
  for (const [peer, mine] of [
    ['postgraphile/write', 'write'],
    ['postgraphile/create', 'write/create'],
  ] as const) {
    const p = rps(peer);
    const m = rps(mine);
    const cp = state.writeCpu.get(peer);
    const cm = state.writeCpu.get(mine);
    if (p && m)
      state.notes.push(
        `${mine}: ${m.toFixed(0)}/s = ${(m / p).toFixed(2)} × ${peer} (${p.toFixed(0)}/s, PostGraphile 5 on Node, same connections, same run)${cp && cm ? `; by CPU ${((cp.client + cp.pg) / (cm.client + cm.pg)).toFixed(2)} ×` : ''}`,
      );
  }
  for (const [name, c] of state.writeCpu) {
    const per =
      name === 'write' || name === 'postgraphile/write'
        ? 'create+publish pair'
        : name === 'write-ceiling'
          ? 'bare INSERT commit'
          : name === 'write/batch100'
            ? 'batch of 100'
            : 'create';
    const who =
      name === 'write-ceiling'
        ? 'the Bun.SQL client'
        : name.startsWith('postgraphile/')
          ? 'PostGraphile'
          : 'the service';
    state.notes.push(
      `${name}: CPU per ${per}: ${c.client.toFixed(0)} µs in ${who} + ${c.pg.toFixed(0)} µs in PostgreSQL backends = ${(c.client + c.pg).toFixed(0)} µs`,
    );
  }
  const cw = state.writeCpu.get('write');
  const cc = state.writeCpu.get('write-ceiling');
  if (cw && cc)
    state.notes.push(
      `write: by CPU (what a quiet 2-core box would allow when both are CPU-bound): pairs/s ≈ ${((cc.client + cc.pg) / (cw.client + cw.pg)).toFixed(3)} × write-ceiling`,
    );
  if (single && batch)
    state.notes.push(
      `write/batch100: ${(batch * 100).toFixed(0)} records/s in batches of 100 against ${single.toFixed(0)} records/s as single creates = ${((batch * 100) / single).toFixed(1)} × (target ≥ 10 ×)`,
    );
}

/** `svc records import` of a generated NDJSON file into the running service (issue 11: ≥ 5,000 records/s for 100,000). */
export async function runImport(apiUrl: string, secretKey: string, quick: boolean): Promise<void> {
  const count = Number(process.env.BENCH_IMPORT_RECORDS || (quick ? 20_000 : 100_000));
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'records.ndjson');
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    lines.push(
      JSON.stringify({
        naturalKey: `imp-${i}`,
        data: {
          title: `Imported ${i}`,
          slug: `imported-${i}`,
          summary: 'imported by the bench',
          rating: i % 100,
          featured: i % 3 === 0,
        },
      }),
    );
  }
  writeFileSync(file, lines.join('\n') + '\n');
  process.stderr.write(`bench: write/import (svc records import of ${count.toLocaleString('en')} records) … `);
  let out = '';
  let err = '';
  const t0 = performance.now();
  const code = await runCli(
    ['records', 'import', '--file', file, '--model', 'note', '--json'],
    { out: (x) => (out += x), err: (x) => (err += x) },
    { SVC_URL: apiUrl, SVC_API_KEY: secretKey },
  );
  const seconds = (performance.now() - t0) / 1000;
  if (code !== 0) {
    state.notes.push(`write/import: failed: ${err.split('\n')[0]!.slice(0, 160)}`);
    process.stderr.write('failed\n');
    return;
  }
  const r = JSON.parse(out) as { created: number };
  state.notes.push(
    `write/import: svc records import created ${r.created.toLocaleString('en')} records in ${seconds.toFixed(1)} s = ${Math.round(r.created / seconds).toLocaleString('en')} records/s (batches of 500, target ≥ 5,000/s)`,
  );
  process.stderr.write(`${Math.round(r.created / seconds)} records/s\n`);
}
