/**
 * bench/results/<UTC timestamp>.json: what the run measured, on what box, under what load, by
 * which command (bench/results.ts has the shape; results-md.ts reads these files).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { wrkPath } from './drive.ts';
import { planFor } from './options.ts';
import { peerNode } from './peers.ts';
import { rowFigures, rowsJson, type Row } from './report.ts';
import { describeBox, evaluate, gitState, stamp, type Conditions, type ResultFile } from './results.ts';
import { RESULTS_DIR } from './results-md.ts';
import { state } from './state.ts';

/** The box, its PostgreSQL, the load generator and (when a Node peer ran) the Node 22 they ran on. */
export function machine(peerNodeUsed: boolean): ResultFile['machine'] {
  const wrk = wrkPath();
  const loadgen = `${wrk ? 'wrk (reads), bun bench/load.ts (write)' : 'bun bench/load.ts'}; ${process.env.BENCH_CONNECTIONS || 32} connections`;
  return describeBox({
    postgres: state.db?.version ?? 'not used',
    database: state.db?.label ?? 'not used',
    loadgen,
    peerNode: peerNodeUsed ? peerNode() : undefined,
  });
}

/** The exact command, with the BENCH_* variables that shaped the run. */
function commandLine(): string {
  const env = Object.entries(process.env)
    .filter(([k]) => k.startsWith('BENCH_') && k !== 'BENCH_RESULTS_DIR' && k !== 'BENCH_RESULTS_MD')
    .map(([k, v]) => `${k}=${v}`);
  const args = process.argv.slice(2).join(' ');
  const cmd =
    process.env.npm_lifecycle_event === 'bench'
      ? `npm run bench${args ? ` -- ${args}` : ''}`
      : `bun bench/run.ts${args ? ` ${args}` : ''}`;
  return [...env, cmd].join(' ');
}

/** bench/results/<UTC timestamp>.json: this run as data (bench/results.ts). */
export function writeResult(r: {
  started: Date;
  rows: Row[];
  before: Conditions;
  after: Conditions;
  quick: boolean;
  machine: ResultFile['machine'];
  sections: string[];
}): string {
  const figures = { ...rowFigures(r.rows), ...state.extraFigures };
  const warm = r.rows.map((x) => x.result?.warmupMs).filter((x): x is number => x !== undefined);
  const plan = planFor({ names: [], quick: r.quick, profile: undefined, explicit: false }, '', undefined, [{}]);
  const finished = new Date();
  const data: ResultFile = {
    version: 1,
    started: r.started.toISOString(),
    finished: finished.toISOString(),
    seconds: (finished.getTime() - r.started.getTime()) / 1000,
    command: commandLine(),
    quick: r.quick,
    ...gitState(),
    machine: r.machine,
    conditions: {
      before: r.before,
      after: r.after,
      warmupMs: plan.warmupMs,
      durationMs: plan.durationMs,
      steadyWarmup: warm.length
        ? `until steady (3 × 500 ms windows within 10 %), at least ${plan.warmupMs / 1000} s: ${Math.min(...warm) / 1000}–${Math.max(...warm) / 1000} s${wrkPath() ? '; wrk rows: fixed' : ''}`
        : `${plan.warmupMs / 1000} s`,
    },
    rows: rowsJson(r.rows),
    figures,
    scenarios: evaluate(figures),
    notes: state.notes,
    sections: r.sections,
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${stamp(r.started)}.json`);
  writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
  return file;
}
