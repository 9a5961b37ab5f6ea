import { cpus, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import type { LoadResult } from './load.ts';

/** One row of the table: a scenario of the service or a reference, measured or `n/a (reason)`. */
export interface Row {
  name: string;
  /** Which query shape it answers; ratios compare rows of the same shape. */
  shape: 'read' | 'filtered' | 'write' | 'operations' | 'provision' | 'files';
  reference: boolean;
  result?: LoadResult & { rssMb: number | undefined };
  na?: string;
}

export const COLUMNS = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'peak RSS MB', '× ceiling-jit', '× postgraphile', '× yoga-node', '× write-ceiling'] as const;

const PEERS = ['ceiling-jit', 'postgraphile', 'yoga-node'] as const;

function peerName(peer: string, shape: Row['shape'], row: string): string {
  // Writes: each row has its own peer row (`write` → `postgraphile/write`, `write/create` → `postgraphile/create`).
  if (shape === 'write') return `${peer}/${row === 'write' ? 'write' : row.replace(/^write\//, '')}`;
  return shape === 'read' ? peer : `${peer}/${shape}`;
}

const f = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

export function tableLines(rows: Row[]): string[] {
  const byName = new Map(rows.map((r) => [r.name, r]));
  const lines = [`| ${COLUMNS.join(' | ')} |`, `|${COLUMNS.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const r of rows) {
    if (!r.result) {
      lines.push(`| ${r.name} | n/a (${(r.na ?? 'not run').replace(/\|/g, '/')}) | | | | | | | |`);
      continue;
    }
    const ratios = PEERS.map((p) => {
      const name = peerName(p, r.shape, r.name);
      const peer = byName.get(name)?.result;
      if (!peer || peer.rps <= 0 || name === r.name) return '';
      return `${(r.result!.rps / peer.rps).toFixed(2)}`;
    });
    // Writes against bare INSERT commits (issue 11): pairs/s and creates/s of the service.
    const ceiling = byName.get('write-ceiling')?.result;
    ratios.push(r.shape === 'write' && !r.reference && r.name !== 'write/batch100' && ceiling && ceiling.rps > 0 ? (r.result.rps / ceiling.rps).toFixed(3) : '');
    const rss = r.result.rssMb === undefined ? 'n/a' : f(r.result.rssMb, 0);
    lines.push(`| ${r.name} | ${f(r.result.rps, 0)} | ${f(r.result.p50, 2)} | ${f(r.result.p99, 2)} | ${rss} | ${ratios.join(' | ')} |`);
  }
  return lines;
}

export interface Machine {
  date: string;
  cores: string;
  memory: string;
  bun: string;
  node: string;
  postgres: string;
  loadgen: string;
  run: string;
}

/** The `node` the Node references run on (Bun's own process.versions.node is its compat level). */
function nodeOnPath(): string {
  try {
    return execFileSync('node', ['--version']).toString().trim().replace(/^v/, '');
  } catch {
    return 'not installed';
  }
}

export function describeMachine(postgres: string, loadgen: string, run: string): Machine {
  const cs = cpus();
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    cores: `${cs.length} × ${cs[0]?.model.trim() ?? 'unknown CPU'}`,
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    bun: Bun.version,
    node: nodeOnPath(),
    postgres,
    loadgen,
    run,
  };
}

export function resultsMarkdown(rows: Row[], m: Machine, notes: string[]): string {
  return [
    '# Benchmark results',
    '',
    'Written by `bun bench` (see bench/README.md). Ratios are req/s of the row divided by req/s of the',
    'reference answering the same query shape (read, filtered) in the same run; higher is better for the row.',
    '',
    `- Date: ${m.date}`,
    `- Machine: ${m.cores}, ${m.memory} memory`,
    `- Bun ${m.bun}; Node ${m.node}; PostgreSQL ${m.postgres}`,
    `- Load generator: ${m.loadgen}`,
    `- Run: ${m.run}`,
    '',
    ...tableLines(rows),
    '',
    ...(notes.length ? ['Notes:', '', ...notes.map((n) => `- ${n}`), ''] : []),
  ].join('\n');
}
