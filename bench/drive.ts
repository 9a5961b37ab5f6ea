import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { startChild } from './procs.ts';
import type { LoadPlan, LoadResult } from './load.ts';

/**
 * Drives one load run from a separate process: `wrk` when it is on PATH (and the plan is plain
 * requests), else bench/load.ts under Bun. `BENCH_LOADGEN=bun` forces our own generator.
 */
let scratchDir: string | undefined;
let seq = 0;

/** The plan files' folder, made on first use (importing this module creates nothing). */
function scratch(): string {
  return (scratchDir ??= mkdtempSync(join(tmpdir(), 'svc-bench-load-')));
}

/** Removes the plan files (called once at the end of a run). */
export function removeScratch(): void {
  if (scratchDir) rmSync(scratchDir, { recursive: true, force: true });
  scratchDir = undefined;
}

export function wrkPath(): string | undefined {
  if (process.env.BENCH_LOADGEN === 'bun') return undefined;
  return Bun.which('wrk') ?? undefined;
}

export function loadgenName(plan: Pick<LoadPlan, 'mode'>): string {
  return plan.mode === 'request' && wrkPath() ? 'wrk' : 'bun bench/load.ts';
}

function luaString(s: string): string {
  return `[==[${s}]==]`;
}

function wrkScript(plan: LoadPlan): string {
  const sets = plan.headerSets.map(
    (h) =>
      `{${Object.entries(h)
        .map(([k, v]) => `[ ${luaString(k)} ] = ${luaString(v)}`)
        .join(',')}}`,
  );
  return `
wrk.method = "POST"
wrk.body = ${luaString(plan.body ?? '')}
wrk.headers["content-type"] = "application/json"
local sets = {${sets.join(',\n')}}
local n = 0
request = function()
  n = n + 1
  local h = sets[(n % #sets) + 1]
  for k, v in pairs(h) do wrk.headers[k] = v end
  return wrk.format()
end
-- A response that is not 200, or carries a GraphQL "errors" entry, is an error, not throughput.
bad = 0
local threads = {}
setup = function(thread) table.insert(threads, thread) end
response = function(status, headers, body)
  if status ~= 200 or (body and string.find(body, '"errors"', 1, true)) then bad = bad + 1 end
end
done = function(summary, latency, requests)
  local e = summary.errors
  local b = 0
  for _, t in ipairs(threads) do b = b + (t:get("bad") or 0) end
  io.write(string.format('WRKJSON {"requests":%d,"bad":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":%d}\\n',
    summary.requests, b, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout))
end
`;
}

async function collect(child: ReturnType<typeof startChild>, timeoutMs: number): Promise<string> {
  let out = '';
  child.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void child.stop('SIGKILL', 0), timeoutMs);
  await new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
  clearTimeout(timer);
  return out;
}

async function runWrk(wrk: string, plan: LoadPlan): Promise<LoadResult> {
  const script = join(scratch(), `plan-${seq++}.lua`);
  writeFileSync(script, wrkScript(plan));
  const threads = String(Math.max(1, Math.min(4, Math.floor(cpus().length / 2))));
  const conns = String(Math.max(plan.connections, Number(threads)));
  const base = ['-t', threads, '-c', conns, '-s', script, '--timeout', '5s'];
  if (plan.warmupMs > 0) {
    const w = startChild(wrk, [...base, '-d', `${Math.max(1, Math.round(plan.warmupMs / 1000))}s`, plan.url], {
      label: 'wrk',
    });
    await collect(w, plan.warmupMs + 15_000);
  }
  const child = startChild(wrk, [...base, '-d', `${Math.max(1, Math.round(plan.durationMs / 1000))}s`, plan.url], {
    label: 'wrk',
  });
  const out = await collect(child, plan.durationMs + 15_000);
  const m = /WRKJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`wrk printed no summary: ${child.tail()}`);
  const r = JSON.parse(m[1]!) as {
    requests: number;
    bad: number;
    duration_us: number;
    p50_us: number;
    p99_us: number;
    errors: number;
  };
  return wrkResult(r);
}

/** wrk's summary → a LoadResult: answered requests that were errors (`bad`) are not throughput. */
export function wrkResult(r: {
  requests: number;
  bad: number;
  duration_us: number;
  p50_us: number;
  p99_us: number;
  errors: number;
}): LoadResult {
  const seconds = r.duration_us / 1e6;
  const ok = Math.max(0, r.requests - r.bad);
  const errors = r.bad + r.errors;
  return {
    requests: ok,
    seconds,
    rps: ok / seconds,
    p50: r.p50_us / 1000,
    p99: r.p99_us / 1000,
    errors,
    ...(errors > 0
      ? {
          latencyIncludesErrors: true,
          firstError: `wrk: ${r.bad} error responses, ${r.errors} socket errors or timeouts`,
        }
      : {}),
  };
}

async function runBunLoad(plan: LoadPlan): Promise<LoadResult> {
  const file = join(scratch(), `plan-${seq++}.json`);
  writeFileSync(file, JSON.stringify(plan));
  const child = startChild(process.execPath, [join(import.meta.dir, 'load.ts'), file], { label: 'load' });
  const out = await collect(child, plan.warmupMs + plan.durationMs + 30_000);
  const m = /LOADJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`load generator printed no summary: ${child.tail()}`);
  return JSON.parse(m[1]!) as LoadResult;
}

export function runLoad(plan: LoadPlan): Promise<LoadResult> {
  const wrk = wrkPath();
  return plan.mode === 'request' && wrk ? runWrk(wrk, plan) : runBunLoad(plan);
}
