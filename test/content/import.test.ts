import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, type TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { perTestDirs } from '../support/tmp.ts';

/** Each test's NDJSON files, removed after it. */
const tempDir = perTestDirs();

let server: TestServer;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  ({ server, p, sk } = await startSecretProject([
    {
      key: 'item',
      name: 'Item',
      fields: [
        { key: 'title', type: 'text' },
        { key: 'rank', type: 'number' },
      ],
    },
    { key: 'tag', name: 'Tag', versioned: false, fields: [{ key: 'label', type: 'text', required: true }] },
  ]));
});
afterAll(() => server.stop());

function ndjson(lines: unknown[]): string {
  const dir = tempDir('svc-import-');
  const file = join(dir, 'records.ndjson');
  writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return file;
}

const items = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => ({
    naturalKey: `item-${from + i}`,
    data: { title: `Item ${from + i}`, rank: from + i },
  }));

async function count(model: 'items' | 'tags'): Promise<number> {
  const r = await p.gql(sk, `{ ${model}(first: 1, preview: true) { totalCount } }`);
  return r.body.data[model].totalCount;
}

describe('svc records import', () => {
  test('streams an NDJSON file in batches; running it again skips what exists (resumable)', async () => {
    const half = ndjson(items(0, 700));
    const a = await cli(server, sk, 'records', 'import', '--file', half, '--model', 'item', '--json');
    expect({ code: a.code, err: a.err }).toEqual({ code: 0, err: '' });
    expect(a.json).toMatchObject({ created: 700, skipped: 0 });
    // The whole file after an interruption at 700: only the rest is created.
    const all = ndjson(items(0, 1_200));
    const b = await cli(server, sk, 'records', 'import', '--file', all, '--model', 'item', '--json');
    expect(b.json).toMatchObject({ created: 500, skipped: 700 });
    expect(await count('items')).toBe(1_200);
    const again = await cli(server, sk, 'records', 'import', '--file', all, '--model', 'item', '--json');
    expect(again.json).toMatchObject({ created: 0, skipped: 1_200 });
    expect(await count('items')).toBe(1_200);
    const one = await p.gql(sk, `{ item(naturalKey: "item-1042", preview: true) { title rank _hasDraft } }`);
    expect(one.body.data.item).toEqual({ title: 'Item 1042', rank: 1042, _hasDraft: true });
  });

  test('lines name their model; unversioned records are live at once; the search vector is written', async () => {
    const file = ndjson([
      { modelKey: 'tag', naturalKey: 't-1', data: { label: 'Zebra crossing' } },
      '',
      { modelKey: 'tag', naturalKey: 't-2', locale: 'en', data: { label: 'Ant' } },
    ]);
    const r = await cli(server, sk, 'records', 'import', '--file', file, '--json');
    expect(r.json).toMatchObject({ created: 2, skipped: 0 });
    const pk = await p.key('pk', ['records:read', 'search:read']);
    expect((await p.gql(pk, `{ tag(naturalKey: "t-1") { label } }`)).body.data.tag).toEqual({
      label: 'Zebra crossing',
    });
    const found = await p.gql(pk, `{ searchRecords(query: "zebra") { edges { node { _id } } } }`);
    expect(found.body.data.searchRecords.edges).toHaveLength(1);
  });

  test('a bad record fails its batch with the file line named; earlier batches stay, nothing of its batch is written', async () => {
    const lines: unknown[] = items(5_000, 5_600);
    (lines[550] as { data: Record<string, unknown> }).data.rank = 'high';
    const file = ndjson(lines);
    const before = await count('items');
    const r = await cli(server, sk, 'records', 'import', '--file', file, '--model', 'item');
    expect(r.code).toBe(1);
    expect(r.err).toContain('BAD_USER_INPUT');
    expect(r.err).toContain('line 551');
    expect(r.err).toContain('rank');
    expect(await count('items')).toBe(before + 500);
  });

  test('a line that is not JSON, or has no natural key, stops the import naming the line', async () => {
    const notJson = await cli(
      server,
      sk,
      'records',
      'import',
      '--file',
      ndjson([{ naturalKey: 'ok-1', data: {} }, '{oops']),
      '--model',
      'item',
    );
    expect(notJson.code).toBe(1);
    expect(notJson.err).toContain('line 2: not a JSON object');
    const noKey = await cli(
      server,
      sk,
      'records',
      'import',
      '--file',
      ndjson([{ data: { title: 'x' } }]),
      '--model',
      'item',
    );
    expect(noKey.code).toBe(1);
    expect(noKey.err).toContain('line 1: needs a "naturalKey"');
    const unknown = await cli(
      server,
      sk,
      'records',
      'import',
      '--file',
      ndjson([{ naturalKey: 'u', data: {} }]),
      '--model',
      'nope',
    );
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('line 1.modelKey names no model');
  });
});
