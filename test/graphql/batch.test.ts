import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, type GqlProject } from './helpers.ts';
import { insertApiKey } from '../../src/auth/api-keys.ts';

let server: TestServer;
let p: GqlProject;

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }]);
});
afterAll(() => server.stop());

async function batch(key: string, body: unknown) {
  const res = await fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe('HTTP batches', () => {
  test('an array of operations is answered by an array of results, in order', async () => {
    const key = await p.key('pk', ['records:read']);
    const r = await batch(key, [
      { query: '{ posts(first: 1) { totalCount } }' },
      { query: '{ nope }' },
      { query: '{ post(naturalKey: "x") { _id } }' },
    ]);
    expect(r.status).toBe(200);
    expect(r.body).toHaveLength(3);
    expect(r.body[0]).toEqual({ data: { posts: { totalCount: 0 } } });
    expect(r.body[1].errors[0].message).toStartWith('Cannot query field');
    expect(r.body[2]).toEqual({ data: { post: null } });
    // One failed operation makes the whole answer uncacheable.
    expect(r.headers.get('cache-control')).toBe('no-store');
  });

  test('each operation of a batch counts against the rate limit', async () => {
    const { key } = await insertApiKey(server.svc.sql, {
      tenantId: p.tenantId,
      projectId: p.projectId,
      kind: 'pk',
      name: 'limited',
      scopes: ['records:read'],
      rateLimit: 5,
    });
    const q = { query: '{ posts(first: 1) { totalCount } }' };
    const first = await batch(key, [q, q, q]);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-ratelimit-limit')).toBe('5');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2');
    const over = await batch(key, [q, q, q]);
    expect(over.status).toBe(429);
    expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(over.body.errors[0].extensions.code).toBe('RATE_LIMITED');
  });

  test('an empty or oversized batch is BAD_USER_INPUT', async () => {
    const key = await p.key('pk', ['records:read']);
    for (const body of [[], Array.from({ length: 21 }, () => ({ query: '{ __typename }' }))]) {
      const r = await batch(key, body);
      expect(r.status).toBe(400);
      expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    }
  });
});
