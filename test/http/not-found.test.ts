import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { bootstrapProject, startTestServer, type TestServer } from '../support/server.ts';

let server: TestServer;
let own: { projectId: string; ownerKey: string };
let foreignProject: string;

beforeAll(async () => {
  server = await startTestServer();
  own = await bootstrapProject(server, 'mine');
  foreignProject = (await bootstrapProject(server, 'theirs')).projectId;
});
afterAll(() => server.stop());

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.apiUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${own.ownerKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

describe('the control plane names the missing resource (CONTRACT §5)', () => {
  test('an unknown API key id on every key route: 404 "API key not found"', async () => {
    for (const id of ['key_0123456789abcdef', 'nonsense']) {
      for (const [method, path, body] of [
        ['PATCH', `/v1/control/api-keys/${id}`, { name: 'x' }],
        ['POST', `/v1/control/api-keys/${id}/disable`],
        ['POST', `/v1/control/api-keys/${id}/enable`],
        ['DELETE', `/v1/control/api-keys/${id}`],
      ] as [string, string, unknown?][]) {
        const r = await call(method, path, body);
        expect(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`).toBe(
          `${method} ${path}: 404 ${JSON.stringify({ error: 'NOT_FOUND', message: 'API key not found' })}`,
        );
      }
    }
  });

  test('an unknown project id, or one of another tenant, on every project route: 404 "Project not found"', async () => {
    for (const id of ['prj_missing', foreignProject]) {
      for (const [method, path, body] of [
        ['POST', `/v1/control/projects/${id}/config`, { config: { key: 'k', name: 'n' } }],
        ['GET', `/v1/control/projects/${id}/config`],
        ['GET', `/v1/control/projects/${id}/domains`],
        ['POST', `/v1/control/projects/${id}/domains/verify`, { domain: 'a.example' }],
        ['POST', `/v1/control/projects/${id}/secrets`, { secrets: [] }],
        ['GET', `/v1/control/projects/${id}/customer-roles`],
        ['POST', `/v1/control/projects/${id}/customer-roles`, { key: 'r', name: 'R', permissions: [] }],
        ['PATCH', `/v1/control/projects/${id}/customer-roles/r`, { name: 'R' }],
        ['POST', `/v1/control/projects/${id}/customer-roles/r/disable`],
        ['POST', `/v1/control/projects/${id}/customer-roles/r/assignments`, { customerId: 'c1' }],
        ['DELETE', `/v1/control/projects/${id}/customer-roles/r/assignments/c1`],
        ['GET', `/v1/control/projects/${id}/customer-role-assignments`],
        ['GET', `/v1/control/api-keys?project=${id}`],
        ['POST', '/v1/control/api-keys', { name: 'k', type: 'public', project: id, scopes: ['records:read'] }],
        ['POST', '/v1/control/members', { email: 'a@b.example', role: 'viewer', project: id }],
      ] as [string, string, unknown?][]) {
        const r = await call(method, path, body);
        expect(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`).toBe(
          `${method} ${path}: 404 ${JSON.stringify({ error: 'NOT_FOUND', message: 'Project not found' })}`,
        );
      }
    }
  });

  test('an unknown customer role key and an unregistered domain are named', async () => {
    const base = `/v1/control/projects/${own.projectId}`;
    for (const [method, path, body] of [
      ['PATCH', `${base}/customer-roles/nope`, { name: 'R' }],
      ['POST', `${base}/customer-roles/nope/disable`],
      ['POST', `${base}/customer-roles/nope/assignments`, { customerId: 'c1' }],
      ['DELETE', `${base}/customer-roles/nope/assignments/c1`],
      ['GET', `${base}/customer-role-assignments?role=nope`],
    ] as [string, string, unknown?][]) {
      const r = await call(method, path, body);
      expect(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`).toBe(
        `${method} ${path}: 404 ${JSON.stringify({ error: 'NOT_FOUND', message: 'Customer role not found' })}`,
      );
    }
    const d = await call('POST', `${base}/domains/verify`, { domain: 'nope.example' });
    expect(d.status).toBe(404);
    expect(d.body.message).toStartWith('Domain not found');
  });

  test('an unknown route is still "No such endpoint"', async () => {
    const r = await call('GET', '/v1/control/nothing-here');
    expect(r).toEqual({ status: 404, body: { error: 'NOT_FOUND', message: 'No such endpoint' } });
  });
});
