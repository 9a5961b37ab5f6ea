import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command, CommandContext } from '../command.ts';
import { stringFlag } from '../command.ts';
import { CliError } from '../client.ts';
import { UsageError } from '../args.ts';
import { recordsGql } from './records.ts';

/**
 * `svc records import --file records.ndjson [--model M]` (issue 11). One JSON object per line:
 * `{"modelKey": "post", "naturalKey": "p-1", "locale": "en", "data": {…}}` (`modelKey` may come
 * from `--model`). The file is streamed and sent in batches of 500 lines (fewer when their JSON
 * passes ~800 KB) to `importRecords`, two batches in flight; each batch is one transaction.
 * Records whose natural key exists are skipped, so an interrupted import is resumed by running
 * it again. On a terminal, a progress bar on stderr.
 */
const BATCH = 500;
const BATCH_BYTES = 800_000;
const IN_FLIGHT = 2;
const IMPORT = `mutation($r: [ImportRecordInput!]!) { importRecords(records: $r) { created skipped } }`;

interface Line {
  no: number;
  record: Record<string, unknown>;
  bytes: number;
}

async function* lines(path: string): AsyncGenerator<{ no: number; text: string; bytes: number }> {
  const decoder = new TextDecoder();
  let rest = '';
  let no = 0;
  for await (const chunk of Bun.file(path).stream()) {
    rest += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const text = rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      no++;
      yield { no, text, bytes: Buffer.byteLength(text) + 1 };
    }
  }
  rest += decoder.decode();
  if (rest.length) yield { no: no + 1, text: rest, bytes: Buffer.byteLength(rest) };
}

function progress(total: number): { update(bytes: number, done: number): void; end(): void } {
  const tty = process.stderr.isTTY === true;
  const t0 = performance.now();
  let last = 0;
  return {
    update(bytes, done) {
      if (!tty || performance.now() - last < 100) return;
      last = performance.now();
      const pct = total > 0 ? Math.min(1, bytes / total) : 0;
      const width = 30;
      const bar = '#'.repeat(Math.round(pct * width)).padEnd(width, '.');
      const rate = done / Math.max(0.001, (performance.now() - t0) / 1000);
      process.stderr.write(
        `\r[${bar}] ${(pct * 100).toFixed(0).padStart(3)}%  ${done.toLocaleString('en')} records  ${Math.round(rate).toLocaleString('en')}/s `,
      );
    },
    end() {
      if (tty) process.stderr.write('\n');
    },
  };
}

export const recordsImport: Command = {
  path: ['records', 'import'],
  summary: 'import records from an NDJSON file (resumable: existing natural keys are skipped)',
  usage: 'svc records import --file F.ndjson [--model M]',
  flags: { file: 'string', model: 'string' },
  async run(ctx: CommandContext) {
    const file = stringFlag(ctx.flags, 'file');
    if (!file) throw new UsageError('--file is required');
    const model = stringFlag(ctx.flags, 'model');
    const path = resolve(ctx.dir, file);
    let total: number;
    try {
      total = statSync(path).size;
    } catch (e) {
      throw new CliError(`cannot read ${file}: ${(e as Error).message}`);
    }
    const bar = progress(total);
    const t0 = performance.now();
    let created = 0;
    let skipped = 0;
    let read = 0;
    const inFlight = new Set<Promise<void>>();
    let failure: Error | undefined;
    const send = (batch: Line[]) => {
      const p = (async () => {
        try {
          const out = await recordsGql(ctx, IMPORT, { r: batch.map((l) => l.record) });
          created += out.importRecords.created;
          skipped += out.importRecords.skipped;
          bar.update(read, created + skipped);
        } catch (e) {
          // The server names `records.<i>`: say which line of the file that is.
          const msg = (e as Error).message.replace(
            /records\.(\d+)/g,
            (_, i: string) => `line ${batch[Number(i)]?.no ?? '?'}`,
          );
          failure ??= new CliError(msg);
        }
      })();
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    };
    let batch: Line[] = [];
    let bytes = 0;
    try {
      for await (const l of lines(path)) {
        read += l.bytes;
        if (failure) break;
        if (l.text.trim() === '') continue;
        let record: unknown;
        try {
          record = JSON.parse(l.text);
        } catch {
          throw new CliError(`line ${l.no}: not a JSON object`);
        }
        if (typeof record !== 'object' || record === null || Array.isArray(record))
          throw new CliError(`line ${l.no}: not a JSON object`);
        const r = record as Record<string, unknown>;
        if (r.modelKey === undefined && model) r.modelKey = model;
        if (typeof r.modelKey !== 'string') throw new CliError(`line ${l.no}: needs "modelKey" (or pass --model)`);
        if (typeof r.naturalKey !== 'string' || r.naturalKey === '')
          throw new CliError(`line ${l.no}: needs a "naturalKey" (imports are resumed by natural key)`);
        if (batch.length >= BATCH || (batch.length > 0 && bytes + l.bytes > BATCH_BYTES)) {
          while (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
          send(batch);
          batch = [];
          bytes = 0;
        }
        batch.push({
          no: l.no,
          record: { modelKey: r.modelKey, naturalKey: r.naturalKey, locale: r.locale ?? null, data: r.data ?? {} },
          bytes: l.bytes,
        });
        bytes += l.bytes;
      }
      if (batch.length && !failure) send(batch);
      await Promise.all(inFlight);
    } finally {
      await Promise.allSettled(inFlight);
      bar.end();
    }
    const seconds = (performance.now() - t0) / 1000;
    const output = {
      created,
      skipped,
      seconds: Number(seconds.toFixed(2)),
      recordsPerSecond: Math.round((created + skipped) / Math.max(seconds, 0.001)),
    };
    if (failure)
      throw new CliError(
        `${failure.message} (before it: ${created} created, ${skipped} skipped; run the same import again to resume)`,
      );
    return {
      output,
      text: `imported ${created} records, skipped ${skipped} existing, in ${output.seconds} s (${output.recordsPerSecond.toLocaleString('en')} records/s)`,
    };
  },
};
