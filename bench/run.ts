/**
 * `bun bench [scenario|reference ...] [--quick] [--profile <name>]` (issue 6, CONTRACT §7).
 * Starts the service and the references as child processes on one PostgreSQL, seeds the service
 * through its public surfaces, loads each target from a separate process (wrk or bench/load.ts)
 * and prints one table; every run writes bench/results/<UTC timestamp>.json and regenerates
 * bench/RESULTS.md from the newest result of each scenario (bench/results.ts, results-md.ts).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { authCostLines } from './auth-rows.ts';
import { parseCompare, runCompare } from './compare.ts';
import { openDatabase, seedReferenceTables } from './database.ts';
import { removeScratch } from './drive.ts';
import { ALL, isFanout, parse, SCENARIOS, type Options, type Scenario } from './options.ts';
import { runOwnServices } from './own-services.ts';
import { killAllNow, stopAll } from './procs.ts';
import { runReference } from './reference-rows.ts';
import { tableLines, type Row } from './report.ts';
import { machine, writeResult } from './result-file.ts';
import { conditions } from './results.ts';
import { RESULTS_DIR, writeResultsMarkdown } from './results-md.ts';
import { runService } from './service-rows.ts';
import { state } from './state.ts';
import { REFERENCES } from './targets.ts';
import { trustedRatios } from './trusted.ts';

let exiting = false;
/**
 * Every temporary folder of the run (plan files, response bytes, the services' data folders, the
 * embedded PostgreSQL, the children's own) goes under one folder, removed at the end: the
 * children inherit TMPDIR, and os.tmpdir() reads it on every call.
 */
const RUN_TMP = mkdtempSync(join(tmpdir(), 'svc-bench-run-'));
process.env.TMPDIR = RUN_TMP;

async function cleanup(): Promise<void> {
  await stopAll();
  removeScratch();
  await state.db?.close();
  state.db = undefined;
  rmSync(RUN_TMP, { recursive: true, force: true });
}
function onSignal(sig: string): void {
  if (exiting) return;
  exiting = true;
  console.error(`bench: ${sig}, stopping every process it started`);
  void cleanup().finally(() => process.exit(130));
}

async function main(): Promise<number> {
  let o: Options;
  try {
    const cmp = parseCompare(process.argv.slice(2));
    if (cmp) {
      parse(cmp.args); // the same checks as a plain run, before building anything
      clearTimeout(deadline); // each run it starts has its own
      try {
        return await runCompare(cmp);
      } finally {
        rmSync(RUN_TMP, { recursive: true, force: true });
      }
    }
    o = parse(process.argv.slice(2));
  } catch (err) {
    console.error(`bench: ${(err as Error).message}`);
    return 2;
  }
  const pinned = process.env.BENCH_PORT ? Number(process.env.BENCH_PORT) : undefined;
  if (pinned !== undefined && (!Number.isInteger(pinned) || pinned <= 0 || pinned > 65535)) {
    console.error(`bench: BENCH_PORT must be a port number, got "${process.env.BENCH_PORT}"`);
    return 2;
  }
  const scenarios = o.names.filter((n): n is Scenario => (SCENARIOS as readonly string[]).includes(n));
  const refs = REFERENCES.filter((r) => o.names.includes(r));
  const dbRefs = refs.filter((r) => r === 'postgraphile' || r.startsWith('yoga-'));
  // read-replica runs on a primary and standby of its own (bench/read-replica.ts).
  const needDb = scenarios.some((n) => n !== 'read-replica') || dbRefs.length > 0;
  const before = await conditions();
  /** Whether a Node peer ran (then the result names the Node 22 they ran on). */
  const peerNodeUsed =
    refs.some((r) => r === 'postgraphile' || r.startsWith('yoga-')) ||
    scenarios.includes('write') ||
    scenarios.includes('collab');
  try {
    if (needDb) {
      state.db = await openDatabase();
      if (dbRefs.length) await seedReferenceTables(state.db.url);
    }
    const readBytes: { file?: string } = {};
    // fan-out and collab run their own services and references (bench/fanout.ts, bench/collab.ts).
    const http = scenarios.filter(
      (n) => !isFanout(n) && n !== 'collab' && n !== 'fanout-3proc' && n !== 'read-replica',
    );
    if (http.length) await runService(o, http, pinned, readBytes);
    await runOwnServices(o, scenarios);
    for (const r of refs) await runReference(o, r, readBytes);
  } catch (err) {
    console.error(`bench: ${(err as Error).message.split('\n')[0]}`);
    await cleanup();
    return 1;
  }
  const order = (r: Row) => {
    const base = r.name.split('/')[0]!;
    const i = (ALL as readonly string[]).indexOf(base);
    return (r.reference ? 0 : 100) + i * 2 + (r.name.includes('/') ? 1 : 0);
  };
  const { rows, notes, profiles } = state;
  rows.sort((a, b) => order(a) - order(b));
  notes.push(...trustedRatios(rows));
  const table = [
    ...tableLines(rows.filter((r) => r.name !== 'auth-cost')),
    '',
    ...authCostLines(),
    ...state.loginLines,
    ...state.fanoutLines,
    ...state.collab,
  ];
  console.log(table.join('\n'));
  for (const n of notes) console.error(`note: ${n}`);
  for (const p of profiles)
    console.error(
      existsSync(p) ? `bench: CPU profile written to ${p}` : `bench: CPU profile expected at ${p} was not written`,
    );
  const after = await conditions();
  const file = writeResult({
    rows,
    started,
    before,
    after,
    quick: o.quick,
    machine: machine(peerNodeUsed),
    sections: [...authCostLines(), ...state.loginLines, ...state.fanoutLines, ...state.collab],
  });
  console.error(`bench: results written to ${file}`);
  console.error(`bench: ${writeResultsMarkdown()} regenerated from ${RESULTS_DIR}`);
  await cleanup();
  return 0;
}

const started = new Date();

process.on('SIGINT', () => onSignal('SIGINT'));
process.on('SIGTERM', () => onSignal('SIGTERM'));
process.on('exit', killAllNow);
process.on('exit', () => rmSync(RUN_TMP, { recursive: true, force: true }));
const deadline = setTimeout(
  () => {
    console.error(`bench: gave up after ${process.env.BENCH_TIMEOUT || 1800} s`);
    void cleanup().finally(() => process.exit(1));
  },
  Number(process.env.BENCH_TIMEOUT || 1800) * 1000,
);
deadline.unref();
const code = await main();
process.exit(code);
