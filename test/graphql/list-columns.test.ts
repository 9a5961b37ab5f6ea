import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from './helpers.ts';
import { observeQueries } from '../../src/content/db.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  server = await startTestServer({ SVC_RESPONSE_CACHE: 'off' });
  p = await gqlProject(server, [{ key: 'note', name: 'Note', fields: [{ key: 'body', type: 'text' }] }]);
  sk = await p.key('sk', ALL_SECRET);
  for (const nk of ['a', 'b']) {
    const c = await p.gql(
      sk,
      `mutation($nk: String) { createNote(naturalKey: $nk, data: { body: "hello" }) { _id } }`,
      { nk },
    );
    await p.gql(sk, `mutation($id: ID!) { publishNoteVersion(_id: $id) { _id } }`, { id: c.body.data.createNote._id });
  }
});
afterAll(() => server.stop());

async function listWithSql(query: string) {
  const seen: string[] = [];
  observeQueries((q) => seen.push(q));
  const r = await p.gql(sk, query);
  observeQueries(undefined);
  expect(r.body.errors).toBeUndefined();
  return { data: r.body.data, sql: seen.join('\n') };
}

describe('list reads', () => {
  test('a page selecting only content fields is read without joining records', async () => {
    const { data, sql } = await listWithSql('{ notes(first: 5) { edges { node { _id _modelKey body content } } } }');
    expect(data.notes.edges.map((e: any) => e.node)).toEqual([
      { _id: expect.any(String), _modelKey: 'note', body: 'hello', content: { body: 'hello' } },
      { _id: expect.any(String), _modelKey: 'note', body: 'hello', content: { body: 'hello' } },
    ]);
    expect(sql).not.toContain('join records');
  });

  test('selecting a records column (naturalKey, timestamps, _hasDraft) still returns it', async () => {
    const { data, sql } = await listWithSql(
      '{ notes(first: 5) { edges { node { naturalKey _publishedAt _hasDraft } } } }',
    );
    expect(data.notes.edges.map((e: any) => e.node.naturalKey)).toEqual(['a', 'b']);
    expect(data.notes.edges[0].node._publishedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(data.notes.edges[0].node._hasDraft).toBe(false);
    expect(sql).toContain('join records');
  });

  test('fragments on the node are read with the join, conservatively', async () => {
    const { data } = await listWithSql(
      '{ notes(first: 5) { edges { node { ...F } } } } fragment F on Note { naturalKey }',
    );
    expect(data.notes.edges.map((e: any) => e.node.naturalKey)).toEqual(['a', 'b']);
  });
});
