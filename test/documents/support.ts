import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelDef } from '../../src/projects/types.ts';
import { cli, type TestServer } from '../support/server.ts';
import { removeTempDir, tempDir } from '../support/tmp.ts';

export const MODELS: ModelDef[] = [
  {
    key: 'article',
    name: 'Article',
    fields: [
      { key: 'title', type: 'text', required: true, queryable: true },
      { key: 'summary', type: 'text' },
    ],
  },
] as ModelDef[];

export const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** Writes a manifest file and runs `svc documents push` on it. */
export async function pushManifest(
  server: TestServer,
  ownerKey: string,
  projectId: string,
  manifest: Record<string, string>,
) {
  const dir = tempDir('svc-docs-');
  const file = join(dir, 'persisted-documents.json');
  writeFileSync(file, JSON.stringify(manifest));
  try {
    return await cli(server, ownerKey, 'documents', 'push', file, '--project', projectId, '--json');
  } finally {
    removeTempDir(dir);
  }
}

export function manifestOf(...docs: string[]): Record<string, string> {
  return Object.fromEntries(docs.map((d) => [sha(d), d]));
}

/** POST /graphql with any body. */
export async function post(
  server: { apiUrl: string },
  key: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, body: json, headers: res.headers };
}

/** GET /graphql with URL parameters. */
export async function get(
  base: string,
  key: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${base}/graphql?${new URLSearchParams(params)}`, {
    headers: { 'x-api-key': key, ...headers },
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.status, body: json, headers: res.headers };
}

/** POST a config through the control plane (what `svc push` does). */
export async function pushConfig(
  server: TestServer,
  ownerKey: string,
  projectId: string,
  config: Record<string, unknown>,
) {
  const res = await fetch(`${server.apiUrl}/v1/control/projects/${projectId}/config`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ownerKey}` },
    body: JSON.stringify({ config: { key: 'site', name: 'Site', ...config } }),
  });
  return { status: res.status, body: (await res.json()) as any };
}
