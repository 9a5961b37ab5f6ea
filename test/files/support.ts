import { deflateSync } from 'node:zlib';
import { insertApiKey } from '../../src/auth/api-keys.ts';
import { bootstrapProject, type TestServer } from '../support/server.ts';

/** A real PNG of w×h RGB pixels (signature, IHDR, IDAT, IEND with their CRCs). */
export function png(w: number, h: number, seed = 0): Uint8Array {
  const chunk = (type: string, data: Uint8Array) => {
    const out = new Uint8Array(12 + data.length);
    const v = new DataView(out.buffer);
    v.setUint32(0, data.length);
    out.set(new TextEncoder().encode(type), 4);
    out.set(data, 8);
    v.setUint32(8 + data.length, Bun.hash.crc32(out.subarray(4, 8 + data.length)));
    return out;
  };
  const ihdr = new Uint8Array(13);
  const iv = new DataView(ihdr.buffer);
  iv.setUint32(0, w);
  iv.setUint32(4, h);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const raw = new Uint8Array(h * (1 + w * 3));
  for (let i = 0; i < raw.length; i++) raw[i] = i % (1 + w * 3) === 0 ? 0 : (i * 7 + seed) & 0xff;
  const parts = [
    new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', new Uint8Array()),
  ];
  return Buffer.concat(parts);
}

export interface FilesProject {
  projectId: string;
  key(scopes: string[], opts?: { kind?: 'sk' | 'pk'; allowedFileTypes?: string[] }): Promise<string>;
  upload(key: string, body: FormData, extra?: Record<string, string>): Promise<{ status: number; body: any }>;
  gql(key: string, query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<any>;
}

export async function filesProject(server: TestServer, name = 'media'): Promise<FilesProject> {
  const { tenantId, projectId } = await bootstrapProject(server, name);
  return {
    projectId,
    async key(scopes, opts = {}) {
      const { key } = await insertApiKey(server.svc.sql, {
        tenantId,
        projectId,
        kind: opts.kind ?? 'sk',
        name: 'k',
        scopes,
        allowedFileTypes: opts.allowedFileTypes ?? null,
      });
      return key;
    },
    async upload(key, body, extra = {}) {
      const res = await fetch(`${server.apiUrl}/api/files/upload`, {
        method: 'POST',
        headers: { 'x-api-key': key, ...extra },
        body,
      });
      return { status: res.status, body: await res.json() };
    },
    async gql(key, query, variables, headers = {}) {
      const res = await fetch(`${server.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
        body: JSON.stringify({ query, variables }),
      });
      return res.json();
    },
  };
}

export function form(parts: Record<string, string | Blob | [Blob, string]>): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(parts)) {
    if (Array.isArray(v)) f.append(k, v[0], v[1]);
    else f.append(k, v);
  }
  return f;
}
