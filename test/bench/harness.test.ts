import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { perTestDirs } from '../support/tmp.ts';

/** Each test's folders, removed after it. */
const tempDir = perTestDirs();

/**
 * Smoke test of `bun bench` (issue 6): one cheap reference, --quick, output parses. Figures are
 * never compared to thresholds; only that they are there and positive.
 */
const ROOT = resolve(import.meta.dir, '..', '..');
const COLUMNS = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB', '× ceiling-jit', '× postgraphile', '× yoga-node', '× write-ceiling'];

function cells(line: string): string[] {
  return line.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
}

describe('bun bench', () => {
  test('ceiling-static --quick prints a table with positive figures', async () => {
    // The bench's own temporary files go under this folder too (its TMPDIR), removed after.
    const dir = tempDir('svc-bench-test-');
    const results = join(dir, 'results.md');
    const proc = Bun.spawn([process.execPath, join(ROOT, 'bench', 'run.ts'), 'ceiling-static', '--quick'], {
      cwd: ROOT,
      env: { ...process.env, BENCH_DURATION: '2', BENCH_CONNECTIONS: '8', BENCH_RESULTS: results, BENCH_TIMEOUT: '40', TMPDIR: dir },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const timer = setTimeout(() => proc.kill('SIGINT'), 40_000);
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    expect({ code, err: code === 0 ? '' : err }).toEqual({ code: 0, err: '' });

    const lines = out.split('\n').filter((l) => l.startsWith('|'));
    expect(cells(lines[0]!)).toEqual(COLUMNS);
    const row = lines.map(cells).find((c) => c[0] === 'ceiling-static');
    expect(row).toBeDefined();
    const [rps, p50, p99, rss] = row!.slice(1, 5).map(Number);
    for (const n of [rps, p50, p99, rss]) {
      expect(Number.isFinite(n)).toBe(true);
      expect(n).toBeGreaterThan(0);
    }
    expect(p99!).toBeGreaterThanOrEqual(p50!);
    const md = readFileSync(results, 'utf8');
    expect(md).toContain('| ceiling-static |');
    expect(md).toMatch(/Machine: \d+ ×/);
  }, 45_000);
});
