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

/** `svc api-keys create --name <name> --type <type> --scopes <scopes> …rest` as `token` (the CLI's result, failure and all). */
export function cliCreateKey(
  server: TestServer,
  token: string,
  key: { name: string; type: 'public' | 'secret'; scopes: string },
  ...rest: string[]
) {
  return cli(
    server,
    token,
    'api-keys',
    'create',
    '--name',
    key.name,
    '--type',
    key.type,
    '--scopes',
    key.scopes,
    ...rest,
  );
}

/** `svc members add` of `email` with `role` on `projectId` as `token` (the CLI's result; its JSON holds `controlKey`). */
export function addMember(server: TestServer, token: string, projectId: string, email: string, role: string) {
  return cli(server, token, 'members', 'add', '--email', email, '--role', role, '--project', projectId, '--json');
}

/** A new member of `p`'s project with `role` (a unique email each call): its control key; throws what the CLI said on failure. */
export async function memberKey(
  server: TestServer,
  p: { projectId: string; ownerKey: string },
  role: string,
): Promise<string> {
  const m = await addMember(server, p.ownerKey, p.projectId, `${role}${Math.random()}@x.test`, role);
  if (m.code !== 0) throw new Error(m.err);
  return m.json.controlKey;
}

/** CLI arguments of a tenant key of `type` allowed on `projects` (comma-separated) with `scopes` (comma-separated). */
export function tenantKeyArgs(type: 'public' | 'secret', projects: string, scopes: string): string[] {
  return ['--type', type, '--tenant', '--projects', projects, '--scopes', scopes];
}
