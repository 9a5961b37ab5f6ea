import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import { freePort } from '../../src/store/ports.ts';
import { filesProject, form, png } from './support.ts';
import { waitForReady } from '../support/process.ts';

/** Two processes on one PostgreSQL and one data folder: a file uploaded through one is served by the other. */
const ROOT = join(import.meta.dir, '..', '..');
let server: TestServer;
let proc: Subprocess<'ignore', 'pipe', 'pipe'> | null = null;

beforeAll(async () => {
  server = await startTestServer();
}, 30_000);

afterAll(async () => {
  proc?.kill('SIGKILL');
  await server.stop();
});

async function spawn(port: number, rport: number): Promise<void> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) clean[k] = v;
  proc = Bun.spawn([process.execPath, 'src/main.ts'], {
    cwd: ROOT,
    env: { ...clean, DATABASE_URL: server.databaseUrl, SVC_DATA_DIR: server.dataDir, SVC_ROOT_TOKEN: server.rootToken, PORT: String(port), REALTIME_PORT: String(rport), SVC_READ_POOL: '1', SVC_LOG: 'off' },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  await waitForReady(proc);
}

test('a file uploaded through one process is served, with its headers, by another', async () => {
  const p = await filesProject(server, 'two');
  const key = await p.key(['files:write']);
  const [port, rport] = [await freePort(), await freePort()];
  await spawn(port, rport);
  const bytes = png(7, 3, 5);
  const r = await p.upload(key, form({ file: [new Blob([bytes]), 'pic.png'] }));
  expect(r.status).toBe(201);
  const other = `http://127.0.0.1:${port}${new URL(r.body.url).pathname}`;
  const res = await fetch(other);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('image/png');
  expect(Buffer.from(await res.arrayBuffer()).toString('hex')).toBe(Buffer.from(bytes).toString('hex'));
  const part = await fetch(other, { headers: { range: 'bytes=0-7' } });
  expect(part.status).toBe(206);
  expect((await part.arrayBuffer()).byteLength).toBe(8);
}, 60_000);
