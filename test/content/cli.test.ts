import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { perTestDirs } from '../support/tmp.ts';

/** Each test's record files, removed after it. */
const tempDir = perTestDirs();

let server: TestServer;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text', required: true }] },
  ]);
  sk = await p.key('sk', ALL_SECRET);
});
afterAll(() => server.stop());

/** `svc records save` of `file` as the page with natural key "home" (the first test saves it twice). */
const saveHome = (file: string) =>
  cli(server, sk, 'records', 'save', '--model', 'page', '--natural-key', 'home', '--file', file, '--json');

describe('svc records save / publish', () => {
  test('save creates then updates by natural key; publish makes it public', async () => {
    const dir = tempDir('svc-rec-');
    const file = join(dir, 'home.json');
    writeFileSync(file, JSON.stringify({ title: 'Home' }));
    const a = await saveHome(file);
    expect(a.code).toBe(0);
    expect(a.json).toEqual({ _id: expect.stringMatching(/^rec_/) });
    writeFileSync(file, JSON.stringify({ title: 'Home 2' }));
    const b = await saveHome(file);
    expect(b.json._id).toBe(a.json._id);
    const pub = await cli(server, sk, 'records', 'publish', '--model', 'page', '--id', a.json._id, '--json');
    expect(pub.json).toEqual({ _id: a.json._id, published: true });
    const pk = await p.key('pk', ['records:read']);
    expect((await p.gql(pk, `{ page(naturalKey: "home") { title } }`)).body.data.page.title).toBe('Home 2');
  });

  test('bad data exits non-zero with one line naming the field', async () => {
    const dir = tempDir('svc-rec-');
    const file = join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify({ title: 5 }));
    const r = await cli(server, sk, 'records', 'save', '--model', 'page', '--natural-key', 'x', '--file', file);
    expect(r.code).toBe(1);
    expect(r.err).toContain('BAD_USER_INPUT');
    expect(r.err).toContain('title');
  });
});
