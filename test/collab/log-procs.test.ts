import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { TestServer } from '../support/server.ts';
import type { GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { roomOf, storedDoc, synced, twoProcesses, type Editor, type TwoProcesses } from './support.ts';

/**
 * Two service processes on one room's delta log (issue 27 item 9): the saver hands the room over
 * and the new saver's first save stores what the log lacks; compactions from two processes race
 * on the same room while editors on both processes type and its saver appends. No update is
 * lost: the stored document, the record and every editor agree at the end. Process `a` is this
 * one (saves every few milliseconds, compacts past 3 rows); `b` is spawned with the defaults.
 */
let a: TestServer;
let bUrl: string;
let p: GqlProject;
let key: string;
let on: TwoProcesses['on'];
let stop: TwoProcesses['stop'];

beforeAll(async () => {
  ({ a, bUrl, p, key, on, stop } = await twoProcesses('collab-log-procs', {
    debounceMs: 30,
    maxWaitMs: 150,
    compactRows: 3,
    compactBytes: 4096,
    compactRetryMs: 20,
  }));
}, 60_000);

afterAll(() => stop(), 60_000);

const keyOf = (room: string) => `${p.projectId}/${room}`;

async function create(T: 'Note' | 'Article', title: string): Promise<string> {
  const r = await p.gql(key, `mutation($t: String!) { create${T}(data: { title: $t }) { _id } }`, { t: title });
  return r.body.data[`create${T}`]._id;
}

async function stored(room: string): Promise<unknown> {
  const doc = await storedDoc(a.svc.sql, keyOf(room));
  const json = doc?.getMap('content').toJSON();
  doc?.destroy();
  return json;
}

/** Random edits of the title by `e`, `n` of them, a few milliseconds apart. */
async function type(e: Editor, n: number, seed: number): Promise<void> {
  let s = seed;
  const rnd = (k: number) => (s = (s * 48271) % 2147483647) % k;
  for (let i = 0; i < n; i++) {
    const t = e.text('title');
    if (rnd(5) === 0 && t.length > 3) t.delete(rnd(t.length - 1), 1);
    else t.insert(rnd(t.length + 1), String.fromCharCode(97 + rnd(26)));
    await Bun.sleep(rnd(4) * 5);
  }
}

describe('the delta log across processes', () => {
  test('the saver leaves, the other process takes the room over: its first save stores what the log lacks', async () => {
    const id = await create('Article', 'Hand');
    const room = roomOf('article', id);
    const x = on(a.gatewayUrl, room);
    await synced(x);
    // x's process opened the room first: it saves. y's edits reach it through PostgreSQL.
    const y = on(bUrl, room);
    await synced(y);
    await Promise.all([type(x, 40, 3), type(y, 40, 5)]);
    await eventually(() => x.text('title').toString() === y.text('title').toString(), 10_000);
    await eventually(async () => JSON.stringify(await stored(room)) === JSON.stringify(x.content.toJSON()), 10_000);
    // x leaves: a saves and unloads the room. From now on only b has it; b's editor types.
    x.close();
    await eventually(() => a.svc.collab.registry.peek(keyOf(room)) === undefined, 10_000);
    await type(y, 30, 7);
    y.text('title').insert(0, 'after handover ');
    // b saves by its debounce (2 s): it took the lock, and appended what the stored document lacked.
    await eventually(async () => JSON.stringify(await stored(room)) === JSON.stringify(y.content.toJSON()), 15_000);
    y.close();
    await Bun.sleep(300);
    const z = on(a.gatewayUrl, room);
    await synced(z);
    expect(z.text('title').toString()).toBe(y.text('title').toString());
    expect(z.text('title').toString()).toStartWith('after handover ');
  }, 60_000);

  test('compactions from two processes race on a room that editors on two processes type into: nothing is lost', async () => {
    const id = await create('Note', 'Race');
    const room = roomOf('note', id);
    const x = on(a.gatewayUrl, room);
    await synced(x);
    const y = on(bUrl, room);
    await synced(y);
    // Another process compacts the room as fast as it can, and so does this one, while its
    // saver compacts past 3 rows of its own.
    const loop = Bun.spawn(
      [process.execPath, join(import.meta.dir, 'compact-loop.ts'), a.databaseUrl, keyOf(room), '3000'],
      {
        stdout: 'pipe',
        stderr: 'inherit',
      },
    );
    const out = loop.stdout.getReader();
    const first = new TextDecoder().decode((await out.read()).value);
    expect(first).toStartWith('ready');
    const compactor = a.svc.collab.compactor!;
    const before = { ...compactor.stats };
    let racing = true;
    const here = (async () => {
      while (racing) {
        await compactor.compact(keyOf(room));
        await Bun.sleep(25);
      }
    })();
    const typing = Date.now();
    while (Date.now() - typing < 3_000) await Promise.all([type(x, 20, 11), type(y, 20, 13)]);
    let rest = '';
    for (let r = await out.read(); !r.done; r = await out.read()) rest += new TextDecoder().decode(r.value);
    const other = JSON.parse(rest) as { compactions: number; lost: number };
    racing = false;
    await here;
    await eventually(() => x.text('title').toString() === y.text('title').toString(), 10_000);
    await eventually(async () => JSON.stringify(await stored(room)) === JSON.stringify(x.content.toJSON()), 10_000);
    // Both processes took part: each merged, or lost a race to the other (gen compare-and-swap).
    const mine = { won: compactor.stats.compactions - before.compactions, lost: compactor.stats.lost - before.lost };
    expect(other.compactions + other.lost).toBeGreaterThan(0);
    expect(mine.won + mine.lost).toBeGreaterThan(0);
    expect(other.compactions + mine.won).toBeGreaterThan(0);
    const r = await p.gql(key, 'query($id: ID!) { record(_id: $id) { content } }', { id });
    expect(r.body.data.record.content.title).toBe(x.text('title').toString());
    // And the next room loaded from it, on the other process, holds the same.
    x.close();
    y.close();
    await eventually(() => a.svc.collab.registry.peek(keyOf(room)) === undefined, 10_000);
    await Bun.sleep(2_500);
    const z = on(bUrl, room);
    await synced(z);
    expect(z.content.toJSON()).toEqual(x.content.toJSON());
  }, 60_000);
});
