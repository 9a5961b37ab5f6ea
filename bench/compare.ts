/**
 * `bun bench --compare <git-ref> [scenarios …] [--rounds N] [--quick]` (issue 28, item 2): A/B
 * runs. The other commit is checked out in a temporary git worktree (its node_modules a symlink
 * to this checkout's when package.json and package-lock.json are the same, else `npm install`
 * there), then the two are run alternately N times (default 4; the order flips every round so a
 * drift in the box's load falls on both sides), each a whole `bench/run.ts` with the same
 * arguments. Per figure it prints this checkout ÷ the other per round, their median and spread
 * (min–max), and writes the lot to bench/out/compare-<stamp>.json. Figures come from each run's
 * result file, or, for a commit older than result files, from the req/s column of its table.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { stamp } from './results.ts';
import { PEER_DIR } from './peers.ts';

const ROOT = resolve(import.meta.dir, '..');
const OUT = join(ROOT, 'bench', 'out');

export interface CompareOptions {
  ref: string;
  rounds: number;
  args: string[];
}

export function parseCompare(argv: string[]): CompareOptions | undefined {
  const i = argv.indexOf('--compare');
  if (i < 0) return undefined;
  const ref = argv[i + 1];
  if (!ref || ref.startsWith('--'))
    throw new Error('--compare needs a git ref (a commit, branch or tag), e.g. --compare HEAD~1');
  const rest = [...argv.slice(0, i), ...argv.slice(i + 2)];
  let rounds = 4;
  const r = rest.indexOf('--rounds');
  if (r >= 0) {
    rounds = Number(rest[r + 1]);
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50)
      throw new Error('--rounds needs a whole number from 1 to 50');
    rest.splice(r, 2);
  }
  return { ref, rounds, args: rest };
}

function git(args: string[], cwd = ROOT): string {
  return execFileSync('git', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    .toString()
    .trim();
}

/** Figures from the req/s column of every Markdown table a run printed (for commits without result files). */
export function tableFigures(stdout: string): Record<string, number> {
  const out: Record<string, number> = {};
  let col = -1;
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('|')) {
      col = -1;
      continue;
    }
    const cells = line
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim());
    if (cells[0] === 'scenario') {
      col = cells.indexOf('req/s');
      continue;
    }
    if (col < 0) continue;
    const v = Number(cells[col]);
    if (cells[0] && Number.isFinite(v) && v > 0) out[cells[0].replace(/ ⚠ errors$/, '')] = v;
  }
  return out;
}

function runOnce(
  tree: string,
  args: string[],
  resultsDir: string,
  env: Record<string, string>,
): Promise<Record<string, number>> {
  mkdirSync(resultsDir, { recursive: true });
  const before = new Set(readdirSync(resultsDir));
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [join(tree, 'bench', 'run.ts'), ...args], {
      cwd: tree,
      env: {
        ...process.env,
        ...env,
        BENCH_RESULTS_DIR: resultsDir,
        BENCH_RESULTS_MD: join(resultsDir, 'RESULTS.md'),
        BENCH_RESULTS: join(resultsDir, 'results.md'),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.on('error', fail);
    child.on('exit', (code) => {
      if (code !== 0) return fail(new Error(`bench in ${tree} exited with ${code}`));
      const fresh = readdirSync(resultsDir)
        .filter((f) => f.endsWith('.json') && !before.has(f))
        .sort();
      if (fresh.length) {
        const data = JSON.parse(readFileSync(join(resultsDir, fresh[fresh.length - 1]!), 'utf8')) as {
          figures: Record<string, { value: number; errors?: number }>;
        };
        const figures: Record<string, number> = {};
        // A figure measured with errors is not compared.
        for (const [k, f] of Object.entries(data.figures)) if (!f.errors) figures[k] = f.value;
        return done(figures);
      }
      done(tableFigures(stdout));
    });
  });
}

export function summarize(
  rounds: { mine: Record<string, number>; other: Record<string, number> }[],
): { figure: string; ratios: number[]; median: number; min: number; max: number }[] {
  const names = new Set(rounds.flatMap((r) => Object.keys(r.mine).filter((k) => k in r.other)));
  return [...names].sort().map((figure) => {
    const ratios = rounds
      .filter((r) => r.mine[figure] && r.other[figure])
      .map((r) => r.mine[figure]! / r.other[figure]!);
    const s = [...ratios].sort((a, b) => a - b);
    const mid = s.length / 2;
    const median = s.length % 2 ? s[Math.floor(mid)]! : (s[mid - 1]! + s[mid]!) / 2;
    return { figure, ratios, median, min: s[0]!, max: s[s.length - 1]! };
  });
}

export async function runCompare(o: CompareOptions): Promise<number> {
  const commit = git(['rev-parse', '--verify', `${o.ref}^{commit}`]);
  const tmp = mkdtempSync(join(tmpdir(), 'svc-bench-compare-'));
  const tree = join(tmp, 'tree');
  process.stderr.write(`bench: --compare ${o.ref} (${commit.slice(0, 12)}): worktree in ${tree}\n`);
  git(['worktree', 'add', '--detach', tree, commit]);
  // On Ctrl-C (run.ts exits after stopping its children) the worktree goes too.
  const removeTree = () => {
    try {
      execFileSync('git', ['worktree', 'remove', '--force', tree], { cwd: ROOT, stdio: 'ignore' });
    } catch {}
    rmSync(tmp, { recursive: true, force: true });
  };
  process.once('exit', removeTree);
  try {
    const sameDeps = (() => {
      try {
        git(['diff', '--quiet', commit, '--', 'package.json', 'package-lock.json']);
        return true;
      } catch {
        return false;
      }
    })();
    if (sameDeps && existsSync(join(ROOT, 'node_modules')))
      symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
    else {
      process.stderr.write('bench: its dependencies differ: npm install there … ');
      execFileSync('npm', ['install', '--no-audit', '--no-fund'], {
        cwd: tree,
        stdio: ['ignore', 'ignore', 'inherit'],
        timeout: 900_000,
      });
      process.stderr.write('done\n');
    }
    // The peers are shared when both commits pin the same ones (no second 500 MB install).
    let samePeers = false;
    try {
      git(['diff', '--quiet', commit, '--', 'bench/peers.json']);
      samePeers = existsSync(join(tree, 'bench', 'peers.json'));
    } catch {}
    const env: Record<string, string> = samePeers ? { BENCH_PEERS_DIR: PEER_DIR } : {};
    const rounds: { mine: Record<string, number>; other: Record<string, number> }[] = [];
    for (let i = 0; i < o.rounds; i++) {
      const order: ['mine' | 'other', string][] = [
        ['mine', ROOT],
        ['other', tree],
      ];
      if (i % 2 === 1) order.reverse();
      const got: { mine?: Record<string, number>; other?: Record<string, number> } = {};
      for (const [side, dir] of order) {
        process.stderr.write(`bench: round ${i + 1}/${o.rounds}: ${side === 'mine' ? 'this checkout' : o.ref}\n`);
        got[side] = await runOnce(dir, o.args, join(tmp, `results-${side}`), env);
      }
      rounds.push({ mine: got.mine!, other: got.other! });
    }
    const rows = summarize(rounds);
    const lines = [
      `## --compare ${o.ref} (${commit.slice(0, 12)}): this checkout ÷ ${o.ref}, ${o.rounds} alternated rounds`,
      '',
      'Above 1: this checkout has more of the figure (for req/s, faster; for ms or µs, slower).',
      '',
      '| figure | median | spread (min–max) | per round |',
      '|---|---:|---:|---|',
      ...rows.map(
        (r) =>
          `| ${r.figure} | ${r.median.toFixed(3)} | ${r.min.toFixed(3)}–${r.max.toFixed(3)} | ${r.ratios.map((x) => x.toFixed(3)).join(', ')} |`,
      ),
    ];
    if (rows.length === 0) lines.push('| (no figure measured on both sides) | | | |');
    console.log(lines.join('\n'));
    mkdirSync(OUT, { recursive: true });
    const file = join(OUT, `compare-${stamp()}.json`);
    writeFileSync(
      file,
      JSON.stringify(
        { ref: o.ref, commit, head: git(['rev-parse', 'HEAD']), args: o.args, rounds, summary: rows },
        null,
        2,
      ) + '\n',
    );
    console.error(`bench: comparison written to ${file}`);
    return rows.length ? 0 : 1;
  } finally {
    removeTree();
    process.off('exit', removeTree);
  }
}
