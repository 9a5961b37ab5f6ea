import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { auditServer } from 'graphql-http';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject } from './helpers.ts';

/**
 * Issue 10 row 12: the GraphQL-over-HTTP spec's own audit suite (graphql-http's auditServer)
 * against POST/GET /graphql. No MUST may fail and no SHOULD may warn.
 */
let server: TestServer;
let pk: string;

beforeAll(async () => {
  server = await startTestServer();
  const p = await gqlProject(server, [{ key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] }]);
  pk = await p.key('pk', ['records:read']);
});
afterAll(() => server.stop());

describe('GraphQL over HTTP audit', () => {
  test('auditServer: every MUST and SHOULD holds', async () => {
    const results = await auditServer({
      url: `${server.apiUrl}/graphql`,
      // The audit's requests carry our API key, as every client's do.
      fetchFn: (input: string | URL | Request, init?: RequestInit) => {
        const headers = new Headers(init?.headers);
        headers.set('x-api-key', pk);
        return fetch(input, { ...init, headers });
      },
    });
    const bad = results.filter((r) => r.status === 'error' || r.status === 'warn');
    const report = await Promise.all(
      bad.map(async (r) => `${r.status} ${r.id} ${r.name}: ${'reason' in r ? r.reason : ''}`),
    );
    const notices = results.filter((r) => r.status === 'notice').map((r) => `${r.id} ${r.name}`);
    console.log(
      `audit: ${results.filter((r) => r.status === 'ok').length} ok, ${notices.length} notices${notices.length ? `: ${notices.join('; ')}` : ''}`,
    );
    expect(report).toEqual([]);
  });
});
