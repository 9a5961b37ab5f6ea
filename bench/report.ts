import type { LoadResult } from './load.ts';
import type { Figure, RowJson } from './results.ts';

/** One row of the table: a scenario of the service or a reference, measured or `n/a (reason)`. */
export interface Row {
  name: string;
  /** Which query shape it answers; ratios compare rows of the same shape. */
  shape: 'read' | 'filtered' | 'write' | 'operations' | 'provision' | 'files';
  reference: boolean;
  result?: LoadResult & { rssMb: number | undefined };
  na?: string;
}

export const COLUMNS = [
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
] as const;

const PEERS = ['ceiling-jit', 'postgraphile', 'yoga-jit', 'yoga-cached'] as const;

/** A row measured with failed requests is marked beside its name (its req/s counts successes only). */
export const ERROR_MARK = ' ⚠ errors';

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
      lines.push(`| ${r.name} | n/a (${(r.na ?? 'not run').replace(/\|/g, '/')}) | | | | | | | | | |`);
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
    ratios.push(
      r.shape === 'write' && !r.reference && r.name !== 'write/batch100' && ceiling && ceiling.rps > 0
        ? (r.result.rps / ceiling.rps).toFixed(3)
        : '',
    );
    const rss = r.result.rssMb === undefined ? 'n/a' : f(r.result.rssMb, 0);
    const errors = r.result.errors ?? 0;
    lines.push(
      `| ${r.name}${errors > 0 ? ERROR_MARK : ''} | ${f(r.result.rps, 0)} | ${errors} | ${f(r.result.p50, 2)} | ${f(r.result.p99, 2)} | ${rss} | ${ratios.join(' | ')} |`,
    );
  }
  return lines;
}

const UNITS: Record<Row['shape'], string> = {
  read: 'req/s',
  filtered: 'req/s',
  write: 'ops/s',
  operations: 'executions/s',
  provision: 'req/s',
  files: 'req/s',
};

/** The rows as data for the result file, errors and all. */
export function rowsJson(rows: Row[]): RowJson[] {
  return rows.map((r) =>
    r.result
      ? {
          name: r.name,
          shape: r.shape,
          reference: r.reference,
          rps: r.result.rps,
          p50Ms: r.result.p50,
          p99Ms: r.result.p99,
          ...(r.result.rssMb !== undefined ? { rssMb: r.result.rssMb } : {}),
          requests: r.result.requests,
          errors: r.result.errors ?? 0,
          ...(r.result.firstError ? { firstError: r.result.firstError } : {}),
          seconds: r.result.seconds,
          ...(r.result.warmupMs !== undefined ? { warmupMs: r.result.warmupMs } : {}),
        }
      : { name: r.name, shape: r.shape, reference: r.reference, na: r.na ?? 'not run' },
  );
}

/** Each measured row's throughput as a figure named like the row (successful operations only). */
export function rowFigures(rows: Row[]): Record<string, Figure> {
  const out: Record<string, Figure> = {};
  for (const r of rows)
    if (r.result) out[r.name] = { value: r.result.rps, unit: UNITS[r.shape], errors: r.result.errors ?? 0 };
  return out;
}
