import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, png, type FilesProject } from './support.ts';

/**
 * Issue 27 item 10: NUL bytes in upload form fields (`folder`, `alt`) answered 500 and left a
 * blob on disk that no row names (outside the quota). Fields are checked before any byte is
 * stored, and a failure after the bytes were committed removes them.
 */
let server: TestServer;
let p: FilesProject;
let writer: string;

beforeAll(async () => {
  server = await startTestServer({ SVC_FILES_MAX_BYTES: '200000' });
  p = await filesProject(server, 'fields');
  writer = await p.key(['files:write', 'files:read']);
}, 30_000);
afterAll(() => server.stop());

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const blobOf = (h: string) => join(server.dataDir, 'files', h.slice(0, 2), h.slice(2, 4), h);
const tmpLeft = () => {
  const dir = join(server.dataDir, 'files', 'tmp');
  return existsSync(dir) ? readdirSync(dir) : [];
};
/** Every blob on disk (not temps, staged or derived objects). */
function blobsOnDisk(): string[] {
  const root = join(server.dataDir, 'files');
  if (!existsSync(root)) return [];
  return (readdirSync(root, { recursive: true }) as string[])
    .map((f) => f.split('/'))
    .filter((parts) => parts.length === 3 && /^[0-9a-f]{64}$/.test(parts[2]!))
    .map((parts) => parts[2]!);
}
async function blobsNamed(): Promise<Set<string>> {
  return new Set((await server.svc.sql<{ sha256: string }[]>`select distinct sha256 from files`).map((r) => r.sha256));
}
/** No blob on disk that no row names, and no temp left over. */
async function noOrphans(): Promise<void> {
  const named = await blobsNamed();
  expect(blobsOnDisk().filter((h) => !named.has(h))).toEqual([]);
  expect(tmpLeft()).toEqual([]);
}

/** A FormData with the fields in the given order (`file` where it appears). */
function formOf(entries: [string, string | [Uint8Array, string]][]): FormData {
  const f = new FormData();
  for (const [k, v] of entries) {
    if (Array.isArray(v)) f.append(k, new Blob([v[0]]), v[1]);
    else f.append(k, v);
  }
  return f;
}

describe('upload form fields (item 10)', () => {
  for (const field of ['folder', 'alt'] as const) {
    for (const order of ['before', 'after'] as const) {
      test(`a NUL in ${field}, sent ${order} the file, is a 400 naming the field and leaves no file on disk`, async () => {
        const bytes = png(4, 4, field.length * 10 + (order === 'before' ? 1 : 2));
        const bad: [string, string] = [field, `a\u0000b`];
        const file: [string, [Uint8Array, string]] = ['file', [bytes, 'x.png']];
        const r = await p.upload(writer, formOf(order === 'before' ? [bad, file] : [file, bad]));
        expect(r.status).toBe(400);
        expect(r.body.error).toBe('BAD_USER_INPUT');
        expect(r.body.message).toContain(`${field}: NUL characters are not allowed`);
        expect(existsSync(blobOf(sha(bytes)))).toBe(false);
        await noOrphans();
        // The same upload with a clean field is stored (and its blob exists).
        const ok = await p.upload(writer, formOf([file, [field, 'a/b']]));
        expect(ok.status).toBe(201);
        expect(existsSync(blobOf(sha(bytes)))).toBe(true);
      });
    }
  }

  test('a failure after the bytes were committed removes them (the row insert fails in PostgreSQL)', async () => {
    // A real failure inside the upload's transaction, after the blob was committed under its
    // hash: a trigger refusing one alt text.
    await server.svc.sql.unsafe(`
      create or replace function refuse_alt() returns trigger language plpgsql as $$
      begin if new.alt = 'refuse me' then raise exception 'refused by trigger'; end if; return new; end $$;
      create trigger refuse_alt before insert on files for each row execute function refuse_alt();`);
    try {
      const bytes = png(5, 3, 99);
      const r = await p.upload(
        writer,
        formOf([
          ['file', [bytes, 'y.png']],
          ['alt', 'refuse me'],
        ]),
      );
      expect(r.status).toBe(500);
      expect(JSON.stringify(r.body)).not.toContain('refused by trigger');
      expect(existsSync(blobOf(sha(bytes)))).toBe(false);
      await noOrphans();
      // A blob another row names stays: the same bytes stored once, then a failed second upload.
      const kept = await p.upload(
        writer,
        formOf([
          ['file', [bytes, 'y.png']],
          ['alt', 'fine'],
        ]),
      );
      expect(kept.status).toBe(201);
      const again = await p.upload(
        writer,
        formOf([
          ['file', [bytes, 'y.png']],
          ['alt', 'refuse me'],
        ]),
      );
      expect(again.status).toBe(500);
      expect(existsSync(blobOf(sha(bytes)))).toBe(true);
      const got = await fetch(kept.body.url);
      expect(Buffer.from(await got.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
    } finally {
      await server.svc.sql.unsafe(`drop trigger refuse_alt on files; drop function refuse_alt();`);
    }
  });

  test('fuzz: hostile form fields are 201 or 4xx, never 5xx, and leave no orphan on disk', async () => {
    const hostile = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.constantFrom(
        '\u0000',
        'a\u0000',
        '\ud800',
        'x\udfffy',
        'Zürich/報告',
        '../..',
        '💥'.repeat(300),
        'a'.repeat(1_500),
        ' / / ',
      ),
    );
    let n = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          alt: fc.option(hostile),
          folder: fc.option(hostile),
          filename: fc.option(hostile),
          extra: fc.option(hostile),
          fieldsFirst: fc.boolean(),
        }),
        async (f) => {
          const bytes = png(2, 2, n++ % 250);
          const fields: [string, string][] = [];
          if (f.alt !== null) fields.push(['alt', f.alt]);
          if (f.folder !== null) fields.push(['folder', f.folder]);
          if (f.extra !== null) fields.push([f.extra || 'x', f.extra]);
          const file: [string, [Uint8Array, string]] = ['file', [bytes, f.filename ?? 'f.png']];
          const r = await p.upload(writer, formOf(f.fieldsFirst ? [...fields, file] : [file, ...fields]));
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          if (!(r.status === 201 || (r.status >= 400 && r.status < 500)))
            throw new Error(`HTTP ${r.status}: ${JSON.stringify(r.body)}`);
          if (r.status !== 201) expect(r.body.error).toBe('BAD_USER_INPUT');
        },
      ),
      { seed: 2710, numRuns: 150 },
    );
    await noOrphans();
    console.log(`form field fuzz: ${JSON.stringify([...statuses])}`);
  }, 120_000);
});
