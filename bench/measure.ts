/**
 * One row of the table: a target checked with one request first (preflight), then loaded from a
 * separate process (bench/drive.ts) while its memory, CPU and, where they decide the row,
 * PostgreSQL's backends' CPU are read; the row, its CPU figures and notes go to the run's state.
 */
import { runLoad, loadgenName } from './drive.ts';
import type { LoadPlan } from './load.ts';
import { pgCpuWindow } from './pg-cpu.ts';
import { cpuWindow, rssWindow } from './procs.ts';
import type { Row } from './report.ts';
import { state } from './state.ts';
import type { Target } from './targets.ts';

export const body = (query: string) => JSON.stringify({ query });
export const naRow = (name: string, shape: Row['shape'], reference: boolean, reason: string) =>
  state.rows.push({ name, shape, reference, na: reason.split('\n')[0]!.slice(0, 160) });

/** One request first: the target must answer this document with data and no errors. */
export async function preflight(endpoint: string, body: string, headers: Record<string, string>): Promise<string> {
  return (await preflightAnswer(endpoint, body, headers)).text;
}

/** Headers every server writes itself: left out of those ceiling-static copies. */
const OWN_HEADERS = new Set(['date', 'content-length', 'connection', 'keep-alive', 'transfer-encoding']);

/** preflight(), with the answer's headers (less those every server writes itself). */
export async function preflightAnswer(
  endpoint: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ text: string; headers: [string, string][] }> {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status === 404) throw new Error(`POST ${new URL(endpoint).pathname} → 404`);
  if (res.status !== 200 || text.includes('"errors"')) throw new Error(`HTTP ${res.status}: ${text.slice(0, 140)}`);
  return { text, headers: [...res.headers].filter(([k]) => !OWN_HEADERS.has(k.toLowerCase())) };
}

export async function measure(
  name: string,
  shape: Row['shape'],
  reference: boolean,
  target: Target,
  plan: LoadPlan,
): Promise<void> {
  process.stderr.write(
    `bench: ${name} (${loadgenName(plan)}, ${plan.connections} connections, ${plan.durationMs / 1000} s) … `,
  );
  const rss = rssWindow(target.child.pid);
  const cpu = cpuWindow(target.child.pid);
  // Writes and uncached reads: PostgreSQL's backends share the two cores with the server and
  // the load generator, so their CPU per request decides the row as much as the server's does.
  const pgToo = shape === 'write' || (!reference && name.includes('uncached'));
  const pg = pgToo && state.db ? await pgCpuWindow(state.db.url).catch(() => undefined) : undefined;
  const result = await runLoad(plan);
  const rssMb = rss.end();
  // Warm-up included on both sides: CPU over the whole run ÷ wall time = cores kept busy.
  const used = cpu.end();
  const pgSeconds = await pg?.end();
  if (used && pgSeconds !== undefined && result.rps > 0) {
    const ops = (result.rps * (plan.warmupMs + plan.durationMs)) / 1000;
    if (shape === 'write')
      state.writeCpu.set(name, { client: (used.cpuSeconds * 1e6) / ops, pg: (pgSeconds * 1e6) / ops });
    else {
      state.extraFigures[`${name}/pg-cpu-us-per-request`] = {
        value: (pgSeconds * 1e6) / ops,
        unit: 'µs',
        errors: result.errors,
      };
      state.notes.push(`${name}: PostgreSQL CPU ${((pgSeconds * 1e6) / ops).toFixed(1)} µs per request`);
    }
  }
  if (used && result.rps > 0) {
    // References too: on a box the load generator shares, server CPU per request is the figure a
    // change to the server moves, and --compare reports it beside req/s.
    if (!reference) state.cpuPerRequest.set(name, { ns: (used.cores * 1e9) / result.rps, cores: used.cores });
    state.extraFigures[`${name}/cpu-us-per-request`] = {
      value: (used.cores * 1e6) / result.rps,
      unit: 'µs',
      errors: result.errors,
    };
    state.notes.push(
      `${name}: server CPU ${((used.cores * 1e6) / result.rps).toFixed(1)} µs per request (${used.cores.toFixed(2)} cores busy)`,
    );
  }
  if (result.errors > 0)
    state.notes.push(
      `${name}: ${result.errors} failed requests${result.firstError ? ` (first: ${result.firstError.slice(0, 120)})` : ''}`,
    );
  if (result.requests === 0) {
    state.rows.push({
      name,
      shape,
      reference,
      na: `no successful request${result.firstError ? `: ${result.firstError.slice(0, 80)}` : ''}`,
    });
    process.stderr.write('no requests\n');
    return;
  }
  state.rows.push({ name, shape, reference, result: { ...result, rssMb } });
  process.stderr.write(`${result.rps.toFixed(0)} req/s\n`);
}
