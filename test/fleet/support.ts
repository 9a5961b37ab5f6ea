import { cli, type TestServer } from '../support/server.ts';
import { folder } from '../config/support.ts';

export const PRODUCT = {
  key: 'product',
  name: 'Product',
  versioned: false,
  fields: [
    { key: 'title', type: 'text', required: true },
    { key: 'sku', type: 'text', queryable: true },
  ],
  lookups: [{ keyBy: ['sku'] }],
};

/** A config folder holding the given models (a fleet group's schema folder). */
export function schemaFolder(models: unknown[]): string {
  return folder({ 'svc.config.json': { key: 'fleet', name: 'Fleet schema', models } });
}

/** `svc fleet-groups publish` through the CLI; throws on failure. */
export async function publish(
  server: TestServer,
  token: string,
  group: string,
  models: unknown[],
  name?: string,
): Promise<{ groupId: string; schemaVersion: string; projects: number }> {
  const args = ['fleet-groups', 'publish', '--group', group, '--dir', schemaFolder(models), '--json'];
  if (name) args.push('--name', name);
  const r = await cli(server, token, ...args);
  if (r.code !== 0) throw new Error(r.err);
  return r.json;
}

/** An API key created through the CLI: `{ id, key }`. */
export async function apiKey(server: TestServer, token: string, args: string[]): Promise<{ id: string; key: string }> {
  const r = await cli(
    server,
    token,
    'api-keys',
    'create',
    '--name',
    `k${Math.random().toString(16).slice(2, 8)}`,
    ...args,
    '--json',
  );
  if (r.code !== 0) throw new Error(r.err);
  return r.json;
}

export interface ProvisionCall {
  key?: string;
  projectId?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export async function provision(server: TestServer, c: ProvisionCall): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(c.headers ?? {}) };
  if (c.key) headers['x-api-key'] = c.key;
  if (c.projectId) headers['x-project-id'] = c.projectId;
  const res = await fetch(`${server.apiUrl}/v1/provision`, {
    method: 'POST',
    headers,
    body: JSON.stringify(c.body ?? {}),
  });
  return { status: res.status, body: await res.json() };
}

export async function provisionStatus(
  server: TestServer,
  key: string,
  projectId: string,
  id: string,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.apiUrl}/v1/provision/${encodeURIComponent(id)}`, {
    headers: { 'x-api-key': key, 'x-project-id': projectId },
  });
  return { status: res.status, body: await res.json() };
}

export async function gql(
  server: TestServer,
  headers: Record<string, string>,
  query: string,
  variables?: Record<string, unknown>,
): Promise<any> {
  const res = await fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return res.json();
}
