import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from '../../src/store/ports.ts';
import { startTestServer } from '../support/server.ts';
import { readUrlFor } from '../support/db.ts';
import { ALL_SECRET, gqlProject } from '../graphql/helpers.ts';
import { perTestDirs } from '../support/tmp.ts';

/** Each test's data dirs, removed after it. */
const tempDir = perTestDirs();

/**
 * Issue 11: a kill -9 loses no acknowledged write. A real service process takes 1,000 creates
 * from 16 concurrent clients and is killed with SIGKILL part-way; afterwards every record whose
 * create was answered is in PostgreSQL, whole (content and history), and nothing half-written is.
 */
const ROOT = join(import.meta.dir, '..', '..');
let databaseUrl: string;
let key: string;

beforeAll(async () => {
  const server = await startTestServer();
  const p = await gqlProject(server, [
    {
      key: 'note',
      name: 'Note',
      fields: [
        { key: 'title', type: 'text' },
        { key: 'slug', type: 'text', queryable: true },
      ],
    },
  ]);
  key = await p.key('sk', ALL_SECRET);
  await server.svc.indexes.idle();
  databaseUrl = server.databaseUrl;
  await server.stop();
}, 60_000);

let child: ReturnType<typeof Bun.spawn> | undefined;
afterAll(() => child?.kill('SIGKILL'));

async function waitHealthy(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await Bun.sleep(100);
  }
  throw new Error(`${url} never became healthy`);
}

describe('kill -9 during writes', () => {
  test('every acknowledged create of 1,000 survives SIGKILL of the process, whole', async () => {
    const port = await freePort();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    Object.assign(env, {
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      REALTIME_PORT: String(await freePort()),
      SVC_DATA_DIR: tempDir('svc-kill-'),
      SVC_ROOT_TOKEN: 'rt_kill_test',
      SVC_ROLE: 'all',
    });
    // On the suite's primary and standby (.ci/replicas): the write path that names commit LSNs.
    const readUrl = readUrlFor(databaseUrl);
    if (readUrl) env.DATABASE_READ_URL = readUrl;
    child = Bun.spawn([process.execPath, 'src/main.ts'], { cwd: ROOT, env, stdout: 'ignore', stderr: 'ignore' });
    await waitHealthy(`http://127.0.0.1:${port}/health`);

    const acked: string[] = [];
    let next = 0;
    let killed = false;
    const one = async (n: number) => {
      const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({
          query: 'mutation($d: NoteInput!, $k: String) { createNote(naturalKey: $k, data: $d) { _id } }',
          variables: { k: `k${n}`, d: { title: `t${n}`, slug: `s${n}` } },
        }),
      });
      const body = (await res.json()) as { data?: { createNote?: { _id: string } } };
      if (body.data?.createNote?._id) acked.push(body.data.createNote._id);
    };
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < 1_000) {
          const n = next++;
          if (n === 400 && !killed) {
            killed = true;
            child!.kill('SIGKILL');
          }
          await one(n).catch(() => {}); // refused or cut off once the process is gone
        }
      }),
    );
    await child.exited;
    expect(killed).toBe(true);
    expect(acked.length).toBeGreaterThan(0);
    expect(acked.length).toBeLessThan(1_000);

    const db = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    try {
      const [found] = await db<
        { n: number }[]
      >`select count(*)::int as n from records where id = any(${acked}::text[])`;
      expect(found!.n).toBe(acked.length);
      // Whole: every record has its working content and its history entry, acknowledged or not.
      const [partial] = await db<{ n: number }[]>`
        select count(*)::int as n from records r
        where not exists (select 1 from record_content c where c.record_id = r.id and c.stage = 'draft')
           or not exists (select 1 from record_versions v where v.record_id = r.id and v.action = 'created')`;
      expect(partial!.n).toBe(0);
    } finally {
      await db.end();
    }
  }, 120_000);
});
