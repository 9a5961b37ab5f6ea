import { bootstrapProject, cli, type TestServer } from '../support/server.ts';

/** Helpers for the API-key tests: create keys through the CLI, call `/v1/whoami` with them. */
export interface Setup {
  tenantId: string;
  projectId: string;
  ownerKey: string;
}

export async function setup(server: TestServer, name = 'site'): Promise<Setup> {
  return bootstrapProject(server, name);
}

export async function createKey(
  server: TestServer,
  token: string,
  ...args: string[]
): Promise<{ id: string; key: string }> {
  const r = await cli(server, token, 'api-keys', 'create', '--name', 'k', ...args, '--json');
  if (r.code !== 0) throw new Error(r.err);
  return r.json;
}

export async function tryCreateKey(server: TestServer, token: string, ...args: string[]) {
  return cli(server, token, 'api-keys', 'create', '--name', 'k', ...args, '--json');
}

export async function whoami(
  server: { apiUrl: string },
  headers: Record<string, string>,
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${server.apiUrl}/v1/whoami`, { headers });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, body, headers: res.headers };
}
