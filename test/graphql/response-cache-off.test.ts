import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from './helpers.ts';
import { observeQueries } from '../../src/content/db.ts';

let server: TestServer;
let p: GqlProject;

beforeAll(async () => {
  server = await startTestServer({ SVC_RESPONSE_CACHE: 'off' });
  p = await gqlProject(server, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }]);
});
afterAll(() => server.stop());

describe('SVC_RESPONSE_CACHE=off', () => {
  test('every published read goes to PostgreSQL', async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const pk = await p.key('pk', ['records:read']);
    const c = await p.gql(sk, `mutation { createPost(naturalKey: "x", data: { title: "one" }) { _id } }`);
    await p.gql(sk, `mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }`, { id: c.body.data.createPost._id });
    const q = `{ post(naturalKey: "x") { title } }`;
    expect((await p.gql(pk, q)).body.data.post.title).toBe('one');
    const seen: string[] = [];
    observeQueries((s) => seen.push(s));
    const again = await p.gql(pk, q);
    observeQueries(undefined);
    expect(again.body.data.post.title).toBe('one');
    expect(seen.length).toBeGreaterThan(0);
  });
});
