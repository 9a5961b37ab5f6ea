/**
 * Results as data (issue 28): every `bun bench` run writes bench/results/<UTC timestamp>.json —
 * each row's figures with its error count, every comparison of a scenario with its reference
 * from the same run (ratio, target, met or not), the machine (cores, CPU model and MHz, memory),
 * the load average and CPU steal before and after, a fixed calibration loop's time, the warm-up,
 * the commit, the Bun/Node/PostgreSQL versions and the exact command. bench/RESULTS.md is
 * generated from those files (bench/results-md.ts); nothing in it is written by hand.
 */
import { cpus, loadavg, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { COMPARISONS, type Comparison } from './comparisons.ts';

const ROOT = resolve(import.meta.dir, '..');

/** One measured row (service scenario or reference); `errors` > 0 marks the run as having errors. */
export interface RowJson {
  name: string;
  shape: string;
  reference: boolean;
  rps?: number;
  p50Ms?: number;
  p99Ms?: number;
  rssMb?: number;
  requests?: number;
  errors?: number;
  firstError?: string;
  seconds?: number;
  warmupMs?: number;
  na?: string;
}

/** A named figure of the run (a row's req/s, or a scenario's own measure such as µs per delivery). */
export interface Figure {
  value: number;
  unit: string;
  errors?: number;
}

export interface Conditions {
  at: string;
  loadavg: [number, number, number];
  /** Shares of all CPU time over `sampleMs` from /proc/stat (steal: time the hypervisor took). */
  cpu?: { userPct: number; systemPct: number; idlePct: number; iowaitPct: number; stealPct: number; sampleMs: number };
  /** The fixed calibration loop (`calibrate`): wall and CPU ms, median of 5. */
  calibration: { wallMs: number; cpuMs: number };
}

export interface ScenarioResult {
  id: string;
  scenario: string;
  figure: string;
  value?: number;
  unit: string;
  reference?: string;
  referenceValue?: number;
  ratio?: number;
  target?: string;
  met?: boolean;
  /**
   * Errors in the scenario's row; result files before 2026-11-29 hold the reference's here too.
   * Either side's errors mark that side in the table and the target as not met.
   */
  errors?: number;
  /** Errors in the reference's row (its figure counts what succeeded, like any figure). */
  referenceErrors?: number;
  na?: string;
}

export interface ResultFile {
  version: 1;
  started: string;
  finished: string;
  seconds: number;
  command: string;
  quick: boolean;
  commit: string;
  dirty: boolean;
  machine: {
    cores: number;
    cpuModel: string;
    cpuMHz: number | undefined;
    memoryGiB: number;
    bun: string;
    node: string;
    peerNode?: string;
    postgres: string;
    database: string;
    loadgen: string;
  };
  conditions: { before: Conditions; after: Conditions; warmupMs: number; durationMs: number; steadyWarmup: string };
  rows: RowJson[];
  figures: Record<string, Figure>;
  scenarios: ScenarioResult[];
  notes: string[];
  /** The run's own Markdown sections (auth cost, logins, fan-out, collaboration), as printed. */
  sections: string[];
}

interface CpuTimes {
  user: number;
  system: number;
  idle: number;
  iowait: number;
  steal: number;
  total: number;
}

function procStat(): CpuTimes | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [, user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).map(Number) as number[];
    const total = [user, nice, system, idle, iowait, irq, softirq, steal].reduce((a, b) => a! + (b ?? 0), 0)!;
    return {
      user: user! + nice!,
      system: system! + irq! + softirq!,
      idle: idle!,
      iowait: iowait!,
      steal: steal ?? 0,
      total,
    };
  } catch {
    return undefined;
  }
}

/** CPU shares over a short window, from two /proc/stat samples. */
export function cpuShares(a: CpuTimes, b: CpuTimes, sampleMs: number): Conditions['cpu'] {
  const d = Math.max(1, b.total - a.total);
  const pct = (x: number, y: number) => Math.round((10_000 * (y - x)) / d) / 100;
  return {
    userPct: pct(a.user, b.user),
    systemPct: pct(a.system, b.system),
    idlePct: pct(a.idle, b.idle),
    iowaitPct: pct(a.iowait, b.iowait),
    stealPct: pct(a.steal, b.steal),
    sampleMs,
  };
}

/**
 * A fixed amount of CPU work (integer hashing in a tight loop, ~100 ms on a quiet 2 GHz core):
 * its time says how fast this box is right now, so a reader can tell a slower box or a busy one
 * from a regression. Median of 5; CPU time beside wall time (they differ when the box is shared).
 */
export function calibrate(): { wallMs: number; cpuMs: number } {
  const walls: number[] = [];
  const cpusMs: number[] = [];
  let sink = 0;
  for (let r = 0; r < 5; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let x = r;
    for (let i = 0; i < 20_000_000; i++) x = (Math.imul(x, 31) + i) ^ (x >>> 7);
    sink ^= x;
    walls.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpusMs.push((c.user + c.system) / 1000);
  }
  if (sink === 0.5) console.error(sink); // keeps the loop from being optimised away
  const med = (a: number[]) => Math.round(a.sort((x, y) => x - y)[2]! * 10) / 10;
  return { wallMs: med(walls), cpuMs: med(cpusMs) };
}

export async function conditions(sampleMs = 1000): Promise<Conditions> {
  const a = procStat();
  await Bun.sleep(sampleMs);
  const b = procStat();
  const l = loadavg();
  return {
    at: new Date().toISOString(),
    loadavg: [l[0]!, l[1]!, l[2]!].map((x) => Math.round(x * 100) / 100) as [number, number, number],
    cpu: a && b ? cpuShares(a, b, sampleMs) : undefined,
    calibration: calibrate(),
  };
}

function cpuMHz(): number | undefined {
  try {
    const mhz = [...readFileSync('/proc/cpuinfo', 'utf8').matchAll(/^cpu MHz\s*:\s*([\d.]+)/gm)].map((m) =>
      Number(m[1]),
    );
    if (mhz.length) return Math.round(mhz.reduce((a, b) => a + b, 0) / mhz.length);
  } catch {}
  const s = cpus()[0]?.speed;
  return s ? s : undefined;
}

function version(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim()
      .replace(/^v/, '');
  } catch {
    return 'not installed';
  }
}

export function describeBox(p: {
  postgres: string;
  database: string;
  loadgen: string;
  peerNode?: string;
}): ResultFile['machine'] {
  const cs = cpus();
  return {
    cores: cs.length,
    cpuModel: cs[0]?.model.trim() ?? 'unknown',
    cpuMHz: cpuMHz(),
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    bun: Bun.version,
    node: version('node', ['--version']),
    ...(p.peerNode ? { peerNode: version(p.peerNode, ['--version']) } : {}),
    postgres: p.postgres,
    database: p.database,
    loadgen: p.loadgen,
  };
}

export function gitState(cwd = ROOT): { commit: string; dirty: boolean } {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
        cwd,
        stdio: ['ignore', 'pipe', 'ignore'],
      })
        .toString()
        .trim() !== '';
    return { commit, dirty };
  } catch {
    return { commit: 'unknown', dirty: false };
  }
}

/** `2026-11-28T17-04-05Z`: a file name that sorts by time. */
export function stamp(d = new Date()): string {
  return d
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/:/g, '-');
}

/** Evaluates every comparison whose scenario figure is in this run. */
export function evaluate(figures: Record<string, Figure>, list: readonly Comparison[] = COMPARISONS): ScenarioResult[] {
  const out: ScenarioResult[] = [];
  for (const c of list) {
    const f = figures[c.figure];
    if (!f) continue;
    const r: ScenarioResult = {
      id: c.id,
      scenario: c.scenario,
      figure: c.figure,
      value: f.value,
      unit: f.unit,
      ...(c.target ? { target: c.target.text } : {}),
    };
    const own = f.errors ?? 0;
    let errors = own;
    if (c.reference) {
      r.reference = c.reference;
      const ref = figures[c.reference];
      if (ref) {
        r.referenceValue = ref.value;
        errors += ref.errors ?? 0;
        if (ref.errors) r.referenceErrors = ref.errors;
        if (ref.value > 0 && Number.isFinite(f.value)) r.ratio = f.value / ref.value;
      } else r.na = `${c.reference} not in this run`;
    }
    if (own > 0) r.errors = own;
    if (c.target) {
      const x = c.target.of === 'ratio' ? r.ratio : f.value;
      if (x !== undefined && Number.isFinite(x))
        r.met =
          c.target.op === '>=' ? x >= c.target.value : c.target.op === '<=' ? x <= c.target.value : x < c.target.value;
      // A figure measured with errors never meets its target.
      if (errors > 0) r.met = false;
    }
    out.push(r);
  }
  return out;
}
