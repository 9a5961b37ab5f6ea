/**
 * A reference's own rows (bench/targets.ts starts it): the read and, where it has one, the
 * filtered read, each checked with one request and then measured like the service's.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FILTERED_DOC, PG_FILTERED_DOC, PG_READ_DOC, READ_DOC } from './data.ts';
import { body, measure, naRow, preflight } from './measure.ts';
import { planFor, type Options } from './options.ts';
import type { Row } from './report.ts';
import { state } from './state.ts';
import { startReference, type ReferenceName, type Target } from './targets.ts';

export async function runReference(o: Options, name: ReferenceName, readBytes: { file?: string }): Promise<void> {
  const dbUrl = state.db?.url;
  const shapes: [string, Row['shape'], string][] =
    name === 'postgraphile'
      ? [
          [name, 'read', body(PG_READ_DOC)],
          [`${name}/filtered`, 'filtered', body(PG_FILTERED_DOC)],
        ]
      : name === 'ceiling-static'
        ? [[name, 'read', body(READ_DOC)]]
        : [
            [name, 'read', body(READ_DOC)],
            [`${name}/filtered`, 'filtered', body(FILTERED_DOC)],
          ];
  let target: Target | undefined;
  try {
    if (name === 'ceiling-static' && !readBytes.file) {
      // No service response to copy: serve what ceiling-jit answers to the same document.
      const jit = await startReference('ceiling-jit', {});
      const text = await preflight(jit.endpoint, body(READ_DOC), {});
      await jit.stop();
      readBytes.file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'read.json');
      writeFileSync(readBytes.file, text);
      state.notes.push('ceiling-static serves the ceiling-jit response bytes (the service read was not available)');
    }
    target = await startReference(name, {
      databaseUrl: dbUrl,
      bodyFile: readBytes.file,
      profile: o.profile === name ? name : undefined,
    });
    for (const [rowName, shape, b] of shapes) {
      try {
        await preflight(target.endpoint, b, {});
        await measure(rowName, shape, true, target, planFor(o, target.endpoint, b, [{}]));
      } catch (err) {
        naRow(rowName, shape, true, (err as Error).message);
      }
    }
  } catch (err) {
    for (const [n, s] of shapes) if (!state.rows.some((r) => r.name === n)) naRow(n, s, true, (err as Error).message);
  } finally {
    await target?.stop();
    if (target?.profile) state.profiles.push(target.profile);
  }
}
