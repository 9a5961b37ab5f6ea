import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { startTestServer, type TestServer } from '../support/server.ts';
import { filesProject, type FilesProject } from './support.ts';

/**
 * Issue 27 item 11: multipart file names are UTF-8 (RFC 7578 §4.2), and `filename*`
 * (RFC 5987/8187 extended notation) is read too; `new File([…], "Zürich-報告.txt")` sent with a
 * standard FormData was stored as `ZÃ¼rich-å ±å.txt`.
 */
let server: TestServer;
let p: FilesProject;
let writer: string;

beforeAll(async () => {
  server = await startTestServer();
  p = await filesProject(server, 'names');
  writer = await p.key(['files:write', 'files:read']);
}, 30_000);
afterAll(() => server.stop());

const NAME = 'Zürich-報告.txt';

/** A multipart body written by hand, for part headers FormData does not write. */
async function rawUpload(disposition: string, bytes: string): Promise<{ status: number; body: any }> {
  const boundary = '----svc-test-boundary';
  const body = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; ${disposition}\r\nContent-Type: text/plain\r\n\r\n`,
      'utf8',
    ),
    Buffer.from(bytes),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const res = await fetch(`${server.apiUrl}/api/files/upload`, {
    method: 'POST',
    headers: { 'x-api-key': writer, 'content-type': `multipart/form-data; boundary=${boundary}` },
    body,
  });
  return { status: res.status, body: await res.json() };
}

describe('UTF-8 file names (item 11)', () => {
  test('a File named "Zürich-報告.txt" in a standard FormData keeps its name, in the answer, the URL and the download', async () => {
    const body = new FormData();
    body.append('file', new File(['Grüezi aus Zürich\n'], NAME, { type: 'text/plain' }));
    const r = await p.upload(writer, body);
    expect(r.status).toBe(201);
    expect(r.body.filename).toBe(NAME);
    expect(r.body.url).toEndWith(`/${encodeURIComponent(NAME)}`);
    const got = await fetch(r.body.url);
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('Grüezi aus Zürich\n');
    expect(got.headers.get('content-disposition')).toBe(`attachment; filename*=UTF-8''${encodeURIComponent(NAME)}`);
    const listed = await p.gql(writer, `query($id: ID!) { file(id: $id) { filename } }`, { id: r.body.id });
    expect(listed.data.file.filename).toBe(NAME);
  });

  test('filename* (RFC 8187) is read, and wins over filename', async () => {
    const r = await rawUpload(`filename="fallback.txt"; filename*=UTF-8''${encodeURIComponent(NAME)}`, 'one\n');
    expect(r.status).toBe(201);
    expect(r.body.filename).toBe(NAME);
    const only = await rawUpload(`filename*=utf-8''${encodeURIComponent('Ωmega façade.txt')}`, 'two\n');
    expect(only.body.filename).toBe('Ωmega façade.txt');
  });

  test('raw UTF-8 bytes in filename="…" are UTF-8, not Latin-1', async () => {
    const r = await rawUpload(`filename="${NAME}"`, 'three\n');
    expect(r.status).toBe(201);
    expect(r.body.filename).toBe(NAME);
  });

  test('a long name is cut at 200 UTF-16 units without splitting a character', async () => {
    const body = new FormData();
    body.append('file', new File(['long\n'], `a${'😀'.repeat(150)}.txt`, { type: 'text/plain' }));
    const r = await p.upload(writer, body);
    expect(r.status).toBe(201);
    expect(r.body.filename).toBe(`a${'😀'.repeat(99)}`);
  });

  test('fuzz: any name a File may carry comes back as the same name (reduced to a safe last segment)', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
          fc.string({ unit: 'grapheme', minLength: 150, maxLength: 260 }),
        ),
        async (name) => {
          const body = new FormData();
          body.append('file', new File([`fuzz ${n++}\n`], name, { type: 'text/plain' }));
          const r = await p.upload(writer, body);
          expect(r.status).toBe(201);
          // FormData escapes `"`, CR and LF in a part's file name (WHATWG multipart/form-data
          // encoding); the stored name is what safeFilename makes of the rest (src/files/upload.ts).
          const sent = name.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
          const base = sent.split(/[\\/]/).pop()!;
          let cut = base
            // biome-ignore lint/suspicious/noControlCharactersInRegex: the rule under test strips control characters
            .replace(/[\u0000-\u001f\u007f"<>|:*?]/g, '')
            .replace(/^\.+/, '')
            .trim()
            .slice(0, 200);
          if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1).trim();
          const expected = cut || 'file';
          expect(r.body.filename).toBe(expected);
        },
      ),
      { seed: 2711, numRuns: 100 },
    );
  }, 60_000);
});
