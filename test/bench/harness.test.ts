import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { runPlan } from '../../bench/load.ts';
import { wrkResult } from '../../bench/drive.ts';
import { evaluate, type ResultFile } from '../../bench/results.ts';
import { readResults, resultsMarkdown } from '../../bench/results-md.ts';
import { tableLines, ERROR_MARK } from '../../bench/report.ts';
import { collabFigures } from '../../bench/collab.ts';
import { interleave, type PairSide } from '../../bench/interleave.ts';
import { perTestDirs } from '../support/tmp.ts';

/** Each test's folders, removed after it. */
const tempDir = perTestDirs();

/**
 * `bun bench` (issues 6 and 28): one cheap reference end to end (--quick, output parses, a result
 * file written and RESULTS.md generated from it), and the counting and reporting pieces on their
 * own. Figures are never compared to thresholds; only that they are there, positive and counted
 * honestly.
 */
const ROOT = resolve(import.meta.dir, '..', '..');
const COLUMNS = [
  'scenario',
  'req/s',
  'errors',
  'p50 ms',
  'p99 ms',
  'peak RSS MB',
  '× ceiling-jit',
  '× postgraphile',
  '× yoga-jit',
  '× yoga-cached',
  '× write-ceiling',
];
const scratch = () => tempDir('svc-bench-test-');

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((c) => c.trim());
}

describe('bun bench', () => {
  test('ceiling-static --quick prints a table with positive figures, writes its result file and generates RESULTS.md', async () => {
    const dir = scratch();
    const md = join(dir, 'RESULTS.md');
    const proc = Bun.spawn([process.execPath, join(ROOT, 'bench', 'run.ts'), 'ceiling-static', '--quick'], {
      cwd: ROOT,
      env: {
        ...process.env,
        BENCH_DURATION: '2',
        BENCH_CONNECTIONS: '8',
        BENCH_RESULTS_DIR: dir,
        BENCH_RESULTS_MD: md,
        BENCH_TIMEOUT: '50',
        TMPDIR: dir,
      },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const timer = setTimeout(() => proc.kill('SIGINT'), 55_000);
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    clearTimeout(timer);
    expect({ code, err: code === 0 ? '' : err }).toEqual({ code: 0, err: '' });

    const lines = out.split('\n').filter((l) => l.startsWith('|'));
    expect(cells(lines[0]!)).toEqual(COLUMNS);
    const row = lines.map(cells).find((c) => c[0] === 'ceiling-static');
    expect(row).toBeDefined();
    const [rps, errors, p50, p99, rss] = row!.slice(1, 6).map(Number);
    for (const n of [rps, p50, p99, rss]) {
      expect(Number.isFinite(n)).toBe(true);
      expect(n).toBeGreaterThan(0);
    }
    expect(errors).toBe(0);
    expect(p99!).toBeGreaterThanOrEqual(p50!);

    const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ\.json$/);
    const data = JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as ResultFile;
    expect(data.command).toContain('ceiling-static --quick');
    expect(data.quick).toBe(true);
    expect(data.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(data.machine.cores).toBeGreaterThan(0);
    expect(data.machine.bun).toBe(Bun.version);
    for (const c of [data.conditions.before, data.conditions.after]) {
      expect(c.loadavg).toHaveLength(3);
      expect(c.calibration.wallMs).toBeGreaterThan(0);
    }
    const r = data.rows.find((x) => x.name === 'ceiling-static')!;
    expect(r.rps).toBeCloseTo(rps!, -1);
    expect(r.errors).toBe(0);
    expect(r.warmupMs).toBeGreaterThanOrEqual(1000);
    expect(data.figures['ceiling-static']!.value).toBe(r.rps!);
    // A reference alone is no scenario: the generated table says there is nothing yet.
    expect(readFileSync(md, 'utf8')).toContain('no results yet');
  }, 60_000);
});

describe('honest counting', () => {
  test('failed, erroring and timed-out requests are errors, never throughput or latency samples', async () => {
    let n = 0;
    const server = Bun.serve({
      port: 0,
      async fetch() {
        const i = n++ % 4;
        if (i === 1) return new Response('no', { status: 500 });
        if (i === 2) return Response.json({ errors: [{ message: 'bad' }] });
        if (i === 3) await Bun.sleep(1_500); // past the plan's timeout below
        return Response.json({ data: { ok: true } });
      },
    });
    process.env.BENCH_REQUEST_TIMEOUT_MS = '300';
    try {
      const r = await runPlan({
        url: `http://127.0.0.1:${server.port}/`,
        mode: 'request',
        body: '{}',
        headerSets: [{}],
        connections: 4,
        warmupMs: 0,
        durationMs: 1_500,
      });
      expect(r.errors).toBeGreaterThan(0);
      expect(r.requests).toBeGreaterThan(0);
      // Every fourth request succeeds: successes can never exceed a third of the errors' count + 1 per loop.
      expect(r.requests).toBeLessThanOrEqual(Math.ceil(r.errors / 3) + 4);
      expect(r.rps).toBeCloseTo(r.requests / r.seconds, 5);
      expect(r.firstError).toBeDefined();
    } finally {
      delete process.env.BENCH_REQUEST_TIMEOUT_MS;
      server.stop(true);
    }
  }, 20_000);

  test("wrk's answered-but-failed responses are subtracted from its requests", () => {
    const r = wrkResult({ requests: 1000, bad: 250, duration_us: 2_000_000, p50_us: 1000, p99_us: 5000, errors: 3 });
    expect(r).toMatchObject({ requests: 750, rps: 375, errors: 253, latencyIncludesErrors: true });
    expect(wrkResult({ requests: 10, bad: 0, duration_us: 1_000_000, p50_us: 1, p99_us: 2, errors: 0 }).errors).toBe(0);
  });

  test('collaboration updates that never reach the peer in the window are errors, and no CPU tick is no measurement', () => {
    const base = { editors: 2000, delivered: 0, p50: NaN, p99: NaN, errors: 0, cores: 0.1, rssMb: 100 };
    const f = collabFigures({
      service: { ...base, updatesPerSecond: 3000, deliveredPerSecond: 0, savesPerSecond: 8, pgCores: 0 },
      reference: {
        ...base,
        updatesPerSecond: 3000,
        deliveredPerSecond: 2950,
        delivered: 14750,
        p50: 2,
        p99: 9,
        errors: 1,
      },
      hocuspocus: 'did not start',
    });
    expect(f['collab/updates-per-cpu-second']).toEqual({ value: 0, unit: 'updates/CPU-s', errors: 3000 });
    expect(f['collab/p99']).toBeUndefined();
    expect(f['collab/pg-ms-per-save']).toBeUndefined();
    expect(f['y-websocket/updates-per-cpu-second']).toEqual({ value: 29500, unit: 'updates/CPU-s', errors: 1 });
    expect(f['y-websocket/p99']!.value).toBe(9);
    expect(Object.keys(f).some((k) => k.startsWith('hocuspocus/'))).toBe(false);
    const s = evaluate(f);
    expect(s.find((x) => x.id === 'collab/y-websocket')).toMatchObject({ errors: 3000, referenceErrors: 1 });
  });

  test('a row with errors shows the count and is marked', () => {
    const ok = { requests: 100, seconds: 1, rps: 100, p50: 1, p99: 2, rssMb: 10 };
    const lines = tableLines([
      { name: 'read-cached', shape: 'read', reference: false, result: { ...ok, errors: 7 } },
      { name: 'ceiling-jit', shape: 'read', reference: true, result: { ...ok, errors: 0 } },
    ]);
    const bad = lines.map(cells).find((c) => c[0]!.startsWith('read-cached'))!;
    expect(bad[0]).toBe(`read-cached${ERROR_MARK}`);
    expect(bad[2]).toBe('7');
    expect(lines.map(cells).find((c) => c[0] === 'ceiling-jit')![2]).toBe('0');
  });
});

describe('results as data', () => {
  const file = (started: string, figures: ResultFile['figures']): ResultFile => ({
    version: 1,
    started,
    finished: started,
    seconds: 60,
    command: 'npm run bench -- --quick',
    quick: true,
    commit: 'a'.repeat(40),
    dirty: false,
    machine: {
      cores: 2,
      cpuModel: 'Test CPU',
      cpuMHz: 2600,
      memoryGiB: 4,
      bun: '1.4.4',
      node: '20.0.0',
      postgres: '15.0',
      database: 'DATABASE_URL',
      loadgen: 'bun bench/load.ts',
    },
    conditions: {
      before: {
        at: started,
        loadavg: [1, 1, 1],
        cpu: { userPct: 10, systemPct: 5, idlePct: 80, iowaitPct: 0, stealPct: 3.5, sampleMs: 1000 },
        calibration: { wallMs: 40, cpuMs: 30 },
      },
      after: { at: started, loadavg: [2, 1, 1], calibration: { wallMs: 41, cpuMs: 30 } },
      warmupMs: 1000,
      durationMs: 3000,
      steadyWarmup: '1 s',
    },
    rows: [],
    figures,
    scenarios: evaluate(figures),
    notes: [],
    sections: [],
  });

  test('ratios against the same run, targets met or not, and errors never meet a target', () => {
    const figures: ResultFile['figures'] = {
      'read-cached': { value: 900, unit: 'req/s' },
      'ceiling-static': { value: 1000, unit: 'req/s' },
      'read-cached/interleaved': { value: 900, unit: 'req/s' },
      'ceiling-static/interleaved:read-cached': { value: 1000, unit: 'req/s' },
      'read-uncached/interleaved': { value: 100, unit: 'req/s', errors: 2 },
      'ceiling-jit/interleaved:read-uncached': { value: 150, unit: 'req/s' },
      'read-trusted-uncached/interleaved': { value: 100, unit: 'req/s' },
      'ceiling-jit/interleaved:read-trusted-uncached': { value: 150, unit: 'req/s', errors: 4 },
    };
    const s = evaluate(figures);
    const byId = new Map(s.map((x) => [x.id, x]));
    expect(byId.get('read-cached/ceiling-static')).toMatchObject({ ratio: 0.9 });
    expect(byId.get('read-cached/ceiling-static (interleaved)')).toMatchObject({
      ratio: 0.9,
      met: true,
      target: '≥ 0.8 ×',
    });
    expect(byId.get('read-cached/postgraphile')).toMatchObject({ na: 'postgraphile not in this run' });
    expect(byId.get('read-cached/postgraphile')!.met).toBeUndefined();
    // 100/150 = 0.67 ≥ 0.5, but the figure had failed requests.
    expect(byId.get('read-uncached/ceiling-jit (interleaved)')).toMatchObject({ errors: 2, met: false });
    // The same ratio with the reference's requests failing: marked on the reference's side, not met.
    const refFailed = byId.get('read-trusted-uncached/ceiling-jit (interleaved)')!;
    expect(refFailed).toMatchObject({ referenceErrors: 4, met: false });
    expect(refFailed.errors).toBeUndefined();
    const line = resultsMarkdown([{ file: 'r.json', data: file('2026-03-01T00:00:00.000Z', figures) }])
      .split('\n')
      .find((l) => l.startsWith('| read-trusted-uncached (interleaved) |'))!;
    expect(line).toContain('| 100 req/s | ceiling-jit/interleaved:read-trusted-uncached: 150 req/s ⚠ 4 errors |');
    expect(line).toEndWith('| not met |');
    expect(byId.has('write/postgraphile')).toBe(false);
  });

  test('interleaved pairs: turns flipped each round, a failed round left out of both sides, targets on the ratio of the means', async () => {
    const calls: string[] = [];
    // The box drifts: every call is slower than the last; the scenario runs at 0.8 of the reference.
    let drift = 1;
    const side = (name: string, speed: number, failOn?: string): PairSide => ({
      name,
      run: async (row) => {
        calls.push(row);
        drift *= 0.9;
        return row === failOn ? undefined : 1000 * speed * drift;
      },
    });
    const r = await interleave(
      side('read-trusted', 0.8, 'read-trusted/i3:read-trusted'),
      side('ceiling-static', 1),
      4,
      0.85,
    );
    expect(calls).toEqual([
      'read-trusted/i1:read-trusted',
      'ceiling-static/i1:read-trusted',
      'ceiling-static/i2:read-trusted',
      'read-trusted/i2:read-trusted',
      'read-trusted/i3:read-trusted',
      'ceiling-static/i3:read-trusted',
      'ceiling-static/i4:read-trusted',
      'read-trusted/i4:read-trusted',
    ]);
    expect(r.note).toMatch(/^read-trusted ÷ ceiling-static, interleaved \(3 rounds, order flipped each round\): /);
    const figures = r.figures;
    const ratio =
      figures['read-trusted/interleaved']!.value / figures['ceiling-static/interleaved:read-trusted']!.value;
    // Drift falls on both sides alike: the ratio of the means stays near 0.8 though each call is 10 % slower.
    expect(ratio).toBeGreaterThan(0.75);
    expect(ratio).toBeLessThan(0.85);
    const s = evaluate(figures);
    expect(s.find((x) => x.id === 'read-trusted/ceiling-static (interleaved)')).toMatchObject({
      target: '≥ 0.85 ×',
      met: false,
    });
  });

  test('RESULTS.md is generated from the newest result of each scenario', () => {
    const dir = scratch();
    writeFileSync(
      join(dir, '2026-01-01T00-00-00Z.json'),
      JSON.stringify(
        file('2026-01-01T00:00:00.000Z', {
          'read-cached': { value: 500, unit: 'req/s' },
          'ceiling-static': { value: 1000, unit: 'req/s' },
          write: { value: 300, unit: 'ops/s' },
          'postgraphile/write': { value: 100, unit: 'ops/s' },
        }),
      ),
    );
    writeFileSync(
      join(dir, '2026-02-01T00-00-00Z.json'),
      JSON.stringify(
        file('2026-02-01T00:00:00.000Z', {
          'read-cached': { value: 950, unit: 'req/s', errors: 4 },
          'ceiling-static': { value: 1000, unit: 'req/s' },
          'read-cached/interleaved': { value: 950, unit: 'req/s', errors: 4 },
          'ceiling-static/interleaved:read-cached': { value: 1000, unit: 'req/s' },
        }),
      ),
    );
    writeFileSync(join(dir, 'not-json.json'), '{');
    const md = resultsMarkdown(readResults(dir));
    const rows = md
      .split('\n')
      .filter((l) => l.startsWith('| ') && !l.startsWith('| scenario'))
      .map(cells);
    const cached = rows.find((c) => c[0] === 'read-cached' && c[3]!.startsWith('ceiling-static'))!;
    // The February run is newer: its figure, its errors mark, its ratio; met is "not met" because of the errors.
    expect(cached[1]).toContain('2026-02-01 00:00 quick');
    expect(cached[2]).toBe('950 req/s ⚠ 4 errors');
    expect(cached[4]).toBe('0.95 ×');
    // The target is judged on the interleaved pair's row.
    expect(cached[6]).toBe('');
    const paired = rows.find((c) => c[0] === 'read-cached (interleaved)')!;
    expect(paired[2]).toBe('950 req/s ⚠ 4 errors');
    expect(paired.slice(4)).toEqual(['0.95 ×', '≥ 0.8 ×', 'not met']);
    // write was only measured in January: that run supplies its row.
    const write = rows.find((c) => c[0] === 'write' && c[3]!.startsWith('postgraphile/write'))!;
    expect(write[1]).toContain('2026-01-01');
    expect(write.slice(4)).toEqual(['3.00 ×', '≥ 1.5 ×', 'met']);
    // Both runs are described: CPU, MHz, load, steal, calibration.
    expect(md).toContain('### 2026-01-01T00-00-00Z');
    expect(md).toContain('### 2026-02-01T00-00-00Z');
    expect(md).toContain('2 × Test CPU @ 2600 MHz');
    expect(md).toContain('steal 3.5 %');
    expect(md).toContain('calibration 40 ms wall / 30 ms CPU');
  });
});
