import { afterAll, beforeAll } from 'bun:test';
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import type { ModelDef } from '../../src/projects/types.ts';
import { join } from 'node:path';
import { eventually } from '../support/eventually.ts';
import { freePort } from '../../src/store/ports.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import type { Sql } from '../../src/store/db.ts';
import { loadStored } from '../../src/collab/log-store.ts';
import type { CollabOptions } from '../../src/collab/rooms.ts';

/** Test models: a versioned article and an unversioned (live) note. */
export const MODELS: ModelDef[] = [
  {
    key: 'article',
    name: 'Article',
    fields: [
      { key: 'title', type: 'text', required: true },
      { key: 'body', type: 'richtext' },
      { key: 'views', type: 'number' },
    ],
  },
  {
    key: 'note',
    name: 'Note',
    versioned: false,
    fields: [
      { key: 'title', type: 'text', required: true },
      { key: 'body', type: 'text' },
      { key: 'stars', type: 'number' },
    ],
  },
];

export interface Editor {
  doc: Y.Doc;
  provider: WebsocketProvider;
  content: Y.Map<unknown>;
  text(field: string): Y.Text;
  close(): void;
}

/** A y-websocket client (the library users use) joined to a room of the gateway. */
export function editor(gatewayUrl: string, room: string, params: Record<string, string>): Editor {
  const doc = new Y.Doc();
  const provider = new WebsocketProvider(gatewayUrl.replace(/^http/, 'ws'), room, doc, {
    params,
    disableBc: true,
    maxBackoffTime: 200,
  });
  const content = doc.getMap('content');
  return {
    doc,
    provider,
    content,
    text: (field) => content.get(field) as Y.Text,
    close: () => {
      provider.destroy();
      doc.destroy();
    },
  };
}

/**
 * For a test file's top level: a test server with a project of MODELS and its secret key (set
 * before the file's tests run), and `ed` joining editors with that key (or `params`), all closed
 * and the server stopped after the file.
 */
export function collabFile(projectName: string): {
  server: TestServer;
  p: GqlProject;
  key: string;
  ed(room: string, params?: Record<string, string>): Editor;
} {
  const open: Editor[] = [];
  const file = {
    ed(room: string, params: Record<string, string> = { apiKey: file.key }) {
      const e = editor(file.server.gatewayUrl, room, params);
      open.push(e);
      return e;
    },
  } as ReturnType<typeof collabFile>;
  beforeAll(async () => {
    const made = await startSecretProject(MODELS, projectName);
    Object.assign(file, { server: made.server, p: made.p, key: made.sk });
  }, 60_000);
  afterAll(async () => {
    for (const e of open) e.close();
    await file.server?.stop();
  }, 60_000);
  return file;
}

export async function synced(...eds: Editor[]): Promise<void> {
  await eventually(() => eds.every((e) => e.provider.synced), 10_000);
}

/** The room name of a record's default variant. */
export const roomOf = (model: string, id: string) => `${model}:${id}:default`;

/** An upgrade attempt with plain fetch: the status and body a refused join answers with. */
export async function tryJoin(
  gatewayUrl: string,
  room: string,
  params: Record<string, string>,
): Promise<{ status: number; body: any; headers: Headers }> {
  const u = new URL(`${gatewayUrl}/${room}`);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  const res = await fetch(u, {
    headers: {
      upgrade: 'websocket',
      connection: 'Upgrade',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      'sec-websocket-version': '13',
    },
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body, headers: res.headers };
}

/**
 * A second service process (`src/main.ts`) on the test server's database; resolves once healthy.
 * `opts.bunArgs` go before the script (a bench's `--cpu-prof`), `opts.env` over the environment.
 */
export async function spawnGateway(
  a: TestServer,
  opts: { bunArgs?: string[]; env?: Record<string, string> } = {},
): Promise<{ proc: ReturnType<typeof Bun.spawn>; url: string }> {
  const [port, rport] = [await freePort(), await freePort()];
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  Object.assign(env, {
    DATABASE_URL: a.databaseUrl,
    PORT: String(port),
    REALTIME_PORT: String(rport),
    SVC_ROOT_TOKEN: a.rootToken,
    SVC_DATA_DIR: a.dataDir,
    ...opts.env,
  });
  const proc = Bun.spawn([process.execPath, ...(opts.bunArgs ?? []), 'src/main.ts'], {
    cwd: join(import.meta.dir, '..', '..'),
    env,
    stdout: 'ignore',
    stderr: 'inherit',
  });
  const url = `http://127.0.0.1:${rport}`;
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {}
    if (Date.now() > end) throw new Error('process never became healthy');
    await Bun.sleep(100);
  }
  return { proc, url };
}

/**
 * Two processes on one database, the set-up of every multi-process collaboration test: `a` in
 * this process with a project of MODELS and a secret key, `b` a second service process
 * (`spawnGateway`). `on(gateway, room)` joins an editor; `stop()` closes those
 * editors, then stops `b` (SIGTERM, unless a test stopped it) and `a`. `collab`: `a`'s room
 * timings and compaction.
 */
export interface TwoProcesses {
  a: TestServer;
  b: ReturnType<typeof Bun.spawn>;
  bUrl: string;
  p: GqlProject;
  key: string;
  /** Joins an editor (with the project's secret key unless `params` say otherwise), closed by `stop`. */
  on(gateway: string, room: string, params?: Record<string, string>): Editor;
  stop(): Promise<void>;
}

export async function twoProcesses(projectName: string, collab: CollabOptions = {}): Promise<TwoProcesses> {
  const a = await startTestServer({}, collab);
  try {
    const p = await gqlProject(a, MODELS, projectName);
    const key = await p.key('sk', ALL_SECRET);
    const { proc: b, url: bUrl } = await spawnGateway(a);
    const open: Editor[] = [];
    return {
      a,
      b,
      bUrl,
      p,
      key,
      on(gateway, room, params = { apiKey: key }) {
        const e = editor(gateway, room, params);
        open.push(e);
        return e;
      },
      async stop() {
        for (const e of open) e.close();
        if (b.exitCode === null) b.kill('SIGTERM');
        await b.exited;
        await a.stop();
      },
    };
  } catch (err) {
    await a.stop();
    throw err;
  }
}

/**
 * A room's stored document as a process loading the room reads it (collab_state plus its
 * collab_log rows), or null when none is stored. `roomKey`: `<projectId>/<room name>`.
 */
export async function storedDoc(sql: Sql, roomKey: string): Promise<Y.Doc | null> {
  const s = await loadStored(sql, roomKey);
  if (!s) return null;
  const doc = new Y.Doc();
  Y.applyUpdate(doc, s.state);
  for (const u of s.updates) Y.applyUpdate(doc, u);
  return doc;
}
