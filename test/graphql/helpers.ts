import { insertApiKey } from '../../src/auth/api-keys.ts';
import type { KeyKind } from '../../src/auth/principal.ts';
import { announceSchema, replaceModels } from '../../src/projects/store.ts';
import type { ModelDef } from '../../src/projects/types.ts';
import { bootstrapProject, startTestServer, type TestServer } from '../support/server.ts';

/** A project with models and keys, and a `gql` caller over real HTTP. */
export interface GqlProject {
  projectId: string;
  tenantId: string;
  /** The tenant owner's control key (`svc` commands that need one). */
  ownerKey: string;
  /** `rateLimit`: requests per hour (suites that send thousands of requests raise it). */
  key(kind: KeyKind, scopes: string[], allowedModels?: string[] | null, rateLimit?: number): Promise<string>;
  gql(
    key: string,
    query: string,
    variables?: Record<string, unknown>,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  setModels(models: ModelDef[]): Promise<void>;
}

export const ALL_SECRET = [
  'records:read',
  'records:write',
  'records:publish',
  'records:delete',
  'drafts:read',
  'search:read',
];

export async function gqlProject(server: TestServer, models: ModelDef[], name = 'site'): Promise<GqlProject> {
  const { tenantId, projectId, ownerKey } = await bootstrapProject(server, name);
  const p: GqlProject = {
    projectId,
    tenantId,
    ownerKey,
    async key(kind, scopes, allowedModels = null, rateLimit) {
      const k = await insertApiKey(server.svc.sql, {
        tenantId,
        projectId,
        kind,
        name: `k${Math.random()}`,
        scopes,
        allowedModels,
        ...(rateLimit === undefined ? {} : { rateLimit }),
      });
      return k.key;
    },
    async gql(key, query, variables, headers = {}) {
      const res = await fetch(`${server.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
        body: JSON.stringify({ query, variables }),
      });
      const text = await res.text();
      let body: any;
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
      return { status: res.status, body, headers: res.headers };
    },
    async setModels(ms) {
      const version = await server.svc.sql.begin((tx) => replaceModels(tx as never, projectId, ms));
      if (version !== null) await announceSchema(server.svc.bus, projectId, version);
      await (await server.svc.projects.get(projectId)).reload();
    },
  };
  await p.setModels(models);
  return p;
}

/** A fresh test server with one project of `models` (stopped again if the project fails). */
export async function startProject(models: ModelDef[], name = 'site'): Promise<{ server: TestServer; p: GqlProject }> {
  const server = await startTestServer();
  try {
    return { server, p: await gqlProject(server, models, name) };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** A fresh test server with one project of `models` and its public key `pk` (records:read). */
export async function startGqlProject(models: ModelDef[]): Promise<{ server: TestServer; p: GqlProject; pk: string }> {
  const { server, p, key } = await startWithKey(models, 'site', 'pk', ['records:read']);
  return { server, p, pk: key };
}

/** A fresh test server with one project of `models` and its secret key `sk` (ALL_SECRET). */
export async function startSecretProject(
  models: ModelDef[],
  name = 'site',
): Promise<{ server: TestServer; p: GqlProject; sk: string }> {
  const { server, p, key } = await startWithKey(models, name, 'sk', ALL_SECRET);
  return { server, p, sk: key };
}

/**
 * A fresh test server with one project of `models`, its secret key `sk` (ALL_SECRET) and its
 * public key `pk` (records:read), made in that order: the set-up most GraphQL test files share.
 */
export async function startKeyedProject(
  models: ModelDef[],
): Promise<{ server: TestServer; p: GqlProject; sk: string; pk: string }> {
  const { server, p, key: sk } = await startWithKey(models, 'site', 'sk', ALL_SECRET);
  try {
    return { server, p, sk, pk: await p.key('pk', ['records:read']) };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

async function startWithKey(
  models: ModelDef[],
  name: string,
  keyName: KeyKind,
  scopes: string[],
): Promise<{ server: TestServer; p: GqlProject; key: string }> {
  const server = await startTestServer();
  try {
    const p = await gqlProject(server, models, name);
    return { server, p, key: await p.key(keyName, scopes) };
  } catch (err) {
    await server.stop();
    throw err;
  }
}
