import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import type { GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { roomOf, synced, twoProcesses, type Editor, type TwoProcesses } from './support.ts';

setDefaultTimeout(90_000);

/**
 * One process saves a room: the holder of the room's advisory lock. When the holder's lock
 * session dies (here: its backend terminated by an operator), the holder notices, saves nothing
 * more without the lock, and takes it again or leaves it to the other process — no edit is lost
 * and the record never has two writers.
 */
let a: TestServer;
let bUrl: string;
let p: GqlProject;
let key: string;
let on: TwoProcesses['on'];
let stop: TwoProcesses['stop'] | undefined;

beforeAll(async () => {
  ({ a, bUrl, p, key, on, stop } = await twoProcesses('collab-lock'));
});
afterAll(() => stop?.());

/** Backends holding the room's saver lock (a bigint advisory key: high half classid, low half objid). */
async function holders(roomKey: string): Promise<number[]> {
  const rows = await a.svc.sql`select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1
    and classid::bigint = ((hashtextextended(${roomKey}, 727014) >> 32) & 4294967295)
    and objid::bigint = (hashtextextended(${roomKey}, 727014) & 4294967295)`;
  return rows.map((r) => r.pid as number);
}

async function versions(id: string): Promise<string[]> {
  const rows = await a.svc
    .sql`select data->>'title' as title from record_versions where record_id = ${id} and action = 'updated' order by id`;
  return rows.map((r) => r.title as string);
}

async function title(id: string): Promise<string> {
  const [row] = await a.svc
    .sql`select data->>'title' as title from record_content where record_id = ${id} and stage = 'published'`;
  return row!.title as string;
}

/** Autosave transactions a process committed (its GET /metrics). */
async function savesOf(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^svc_collab_saves_total (\d+)/m.exec(text)?.[1] ?? NaN);
}

/** `sub` is `full` with characters left out (edits only ever insert here). */
function isSubsequence(sub: string, full: string): boolean {
  let i = 0;
  for (const ch of full) if (i < sub.length && sub[i] === ch) i++;
  return i === sub.length;
}

describe('the saver lock', () => {
  test('terminating the saver’s lock backend: the room notices, one process goes on saving, no edit is lost', async () => {
    const r = await p.gql(key, `mutation { createNote(data: { title: "|" }) { _id } }`);
    const id = r.body.data.createNote._id as string;
    const room = roomOf('note', id);
    const roomKey = `${p.projectId}/${room}`;
    // x's process opens the room first: it takes the lock and saves.
    const x = on(a.gatewayUrl, room);
    await synced(x);
    const y = on(bUrl, room);
    await synced(y);
    const local = a.svc.collab.registry.peek(roomKey)!;
    expect(local.isSaver).toBe(true);
    const [lockPid] = await holders(roomKey);
    expect(lockPid).toBe((await a.svc.collab.locks.pid())!);

    const typed: string[] = [];
    const type = async (e: Editor, tag: string, n: number) => {
      for (let i = 0; i < n; i++) {
        const t = e.text('title');
        const token = `${tag}${typed.length}.`;
        typed.push(token);
        if (tag === 'x') t.insert(t.length, token);
        else t.insert(0, token);
        await Bun.sleep(60);
      }
    };
    await Promise.all([type(x, 'x', 5), type(y, 'y', 5)]);
    await eventually(() => x.text('title').toString() === y.text('title').toString(), 10_000);
    // Saved by x's process alone so far.
    const before = x.text('title').toString();
    const end = Date.now() + 20_000;
    while ((await title(id)) !== before && Date.now() < end) await Bun.sleep(100);
    expect(await title(id)).toBe(before);
    const versionsBefore = (await versions(id)).length;
    const [aBefore, bBefore] = [await savesOf(a.gatewayUrl), await savesOf(bUrl)];
    expect(aBefore).toBeGreaterThan(0);
    expect(bBefore).toBe(0);

    // An operator (or a failover) kills the lock session's backend.
    await a.svc.sql`select pg_terminate_backend(${lockPid!})`;
    await eventually(() => a.svc.collab.locks.losses === 1, 10_000);
    await Promise.all([type(x, 'x', 8), type(y, 'y', 8)]);

    // Someone holds the lock again, one backend only, and it is not the dead one.
    const readHolders = async () => holders(roomKey);
    let h = await readHolders();
    for (const stop = Date.now() + 15_000; h.length !== 1 && Date.now() < stop; h = await readHolders())
      await Bun.sleep(100);
    expect(h.length).toBe(1);
    expect(h[0]).not.toBe(lockPid);

    // Every edit lands in the record.
    await eventually(() => x.text('title').toString() === y.text('title').toString(), 10_000);
    const final = x.text('title').toString();
    for (const t of typed) expect(final).toContain(t);
    const stop = Date.now() + 20_000;
    while ((await title(id)) !== final && Date.now() < stop) await Bun.sleep(100);
    expect(await title(id)).toBe(final);

    // One writer after the loss: either x's process (it took the lock back) or y's (it took over).
    expect((await versions(id)).length).toBeGreaterThan(versionsBefore);
    const [aAfter, bAfter] = [(await savesOf(a.gatewayUrl)) - aBefore, (await savesOf(bUrl)) - bBefore];
    expect(aAfter + bAfter).toBeGreaterThan(0);
    expect(aAfter === 0 || bAfter === 0).toBe(true);
    // And never a save that dropped an edit an earlier save had.
    const all = await versions(id);
    for (let i = 1; i < all.length; i++) expect(isSubsequence(all[i - 1]!, all[i]!)).toBe(true);
    x.close();
    y.close();
  });
});
