import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as Y from 'yjs';
import postgres from 'postgres';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { commitCompaction, loadStored, packUpdates, type StoredDoc } from '../../src/collab/log-store.ts';
import { MODELS, editor, roomOf, storedDoc, synced, type Editor } from './support.ts';

/**
 * Saves append deltas to collab_log (issue 27 item 9): the stored document is collab_state plus
 * its log rows, a save writes what changed since the last one, and a compaction (a worker
 * thread) merges the rows it read into the state without ever dropping one appended meanwhile.
 * Editors are y-websocket providers on the in-process gateway; saves come every few
 * milliseconds (debounce 30 ms), compaction only when a test asks for it.
 */
let server: TestServer;
let p: GqlProject;
let key: string;
let sql: postgres.Sql;
const open: Editor[] = [];

beforeAll(async () => {
  server = await startTestServer(
    {},
    { debounceMs: 30, maxWaitMs: 150, compactRows: 1_000_000, compactBytes: 1e12, compactRetryMs: 50 },
  );
  p = await gqlProject(server, MODELS, 'collab-log');
  key = await p.key('sk', ALL_SECRET);
  sql = postgres(server.databaseUrl, { max: 2, onnotice: () => {} });
}, 60_000);

afterAll(async () => {
  for (const e of open) e.close();
  await sql.end();
  await server.stop();
}, 60_000);

const on = (room: string) => {
  const e = editor(server.gatewayUrl, room, { apiKey: key });
  open.push(e);
  return e;
};
const keyOf = (room: string) => `${p.projectId}/${room}`;

async function create(T: 'Note' | 'Article', title: string): Promise<string> {
  const r = await p.gql(key, `mutation($t: String!) { create${T}(data: { title: $t }) { _id } }`, { t: title });
  return r.body.data[`create${T}`]._id;
}

async function rows(room: string): Promise<{ n: number; bytes: number; biggest: number }> {
  const [r] = await sql`select count(*)::int as n, coalesce(sum(octet_length(updates)), 0)::int as bytes,
    coalesce(max(octet_length(updates)), 0)::int as biggest from collab_log where room = ${keyOf(room)}`;
  return r as never;
}

/** The stored document's content (state + log), as the next process to load the room reads it. */
async function stored(room: string): Promise<unknown> {
  const doc = await storedDoc(server.svc.sql, keyOf(room));
  const json = doc?.getMap('content').toJSON();
  doc?.destroy();
  return json;
}

/** Until the stored document holds what the editor holds (saves come within ~150 ms). */
async function storedMatches(room: string, e: Editor): Promise<void> {
  await eventually(async () => JSON.stringify(await stored(room)) === JSON.stringify(e.content.toJSON()), 10_000);
}

const loaded = (room: string) => server.svc.collab.registry.peek(keyOf(room)) !== undefined;

describe('the delta log', () => {
  test('a save appends what changed, not the document; state + log round-trip into the next room', async () => {
    const id = await create('Article', 'Start');
    const room = roomOf('article', id);
    const x = on(room);
    await synced(x);
    const seed =
      await sql`select octet_length(state)::int as n, gen::int from collab_state where room = ${keyOf(room)}`;
    // A document of some size first: 40 KB pasted, then saved.
    x.text('title').insert(5, ` ${'lorem ipsum '.repeat(3_400)}`);
    await storedMatches(room, x);
    // Then keystrokes: each save's row is the few updates since the previous one.
    for (let i = 0; i < 10; i++) {
      x.text('title').insert(0, String(i));
      await Bun.sleep(60);
    }
    await storedMatches(room, x);
    const log = await rows(room);
    expect(log.n).toBeGreaterThanOrEqual(5);
    // The paste's row holds the paste; every other row is a keystroke or two.
    expect(log.bytes - log.biggest).toBeLessThan(log.n * 200);
    const [after] =
      await sql`select octet_length(state)::int as n, gen::int from collab_state where room = ${keyOf(room)}`;
    expect(after).toEqual(seed[0] as never);
    // Everyone leaves: the room unloads; the next editor's room is loaded from state + log.
    x.close();
    await eventually(() => !loaded(room), 10_000);
    const y = on(room);
    await synced(y);
    expect(y.text('title').toString()).toBe(x.text('title').toString());
  }, 30_000);

  test('after many saves by two editors the stored document equals the live one (both kinds of model)', async () => {
    for (const [T, model] of [
      ['Note', 'note'],
      ['Article', 'article'],
    ] as const) {
      const id = await create(T, 'abc');
      const room = roomOf(model, id);
      const [x, y] = [on(room), on(room)];
      await synced(x, y);
      let seed = 7;
      const rnd = (n: number) => (seed = (seed * 48271) % 2147483647) % n;
      for (let i = 0; i < 60; i++) {
        const t = (i % 2 ? x : y).text('title');
        if (rnd(4) === 0 && t.length > 4) t.delete(rnd(t.length - 2), 2);
        else t.insert(rnd(t.length + 1), `${'wxyz'[rnd(4)]}${i}`);
        // Every sixth edit a pause past the debounce: a save.
        await Bun.sleep(i % 6 === 5 ? 60 : rnd(3) * 10);
      }
      await eventually(() => x.text('title').toString() === y.text('title').toString(), 10_000);
      await storedMatches(room, x);
      expect((await rows(room)).n).toBeGreaterThanOrEqual(8);
      if (model === 'note') {
        const r = await p.gql(key, 'query($id: ID!) { record(_id: $id) { content } }', { id });
        expect(r.body.data.record.content.title).toBe(x.text('title').toString());
      }
      x.close();
      y.close();
      await eventually(() => !loaded(room), 10_000);
      const z = on(room);
      await synced(z);
      expect(z.content.toJSON()).toEqual(x.content.toJSON());
    }
  }, 60_000);
});

describe('compaction', () => {
  /** Blocks compactions of `room` at their write (a row lock); appends of log rows still pass. */
  async function blockCompaction(room: string): Promise<() => Promise<void>> {
    const conn = await sql.reserve();
    await conn`begin`;
    await conn`select 1 from collab_state where room = ${keyOf(room)} for no key update`;
    return async () => {
      await conn`commit`;
      conn.release();
    };
  }

  /** Until the compactor's connection waits on that lock: it has read the state and the log. */
  async function compactorWaiting(): Promise<void> {
    await eventually(async () => {
      const [r] = await sql`select count(*)::int as n from pg_stat_activity
        where application_name like 'svc collab-compactor%' and wait_event_type = 'Lock'`;
      return (r as { n: number }).n > 0;
    }, 10_000);
  }

  test('a row appended while the worker merges stays; the rows it read go; nothing is lost', async () => {
    const id = await create('Article', 'Merge');
    const room = roomOf('article', id);
    const x = on(room);
    await synced(x);
    for (let i = 0; i < 6; i++) {
      x.text('title').insert(x.text('title').length, ` ${i}`);
      await Bun.sleep(60);
    }
    await storedMatches(room, x);
    const before = await rows(room);
    const compactor = server.svc.collab.compactor!;
    const release = await blockCompaction(room);
    const running = compactor.compact(keyOf(room));
    await compactorWaiting();
    // A save lands after the worker read the log: a real update of another editor's document.
    const other = new Y.Doc();
    Y.applyUpdate(other, Y.encodeStateAsUpdate(x.doc));
    const sv = Y.encodeStateVector(other);
    (other.getMap('content').get('title') as Y.Text).insert(0, 'Late ');
    const late = Y.encodeStateAsUpdate(other, sv);
    await sql`insert into collab_log (room, updates, sv)
      values (${keyOf(room)}, ${Buffer.from(packUpdates([late]))}, ${Buffer.from(Y.encodeStateVector(other))})`;
    await release();
    const result = await running;
    expect(result?.won).toBe(true);
    expect(result?.merged).toBe(before.n);
    // The late row is all that is left of the log, and the stored document has it.
    expect((await rows(room)).n).toBe(1);
    const doc = await storedDoc(server.svc.sql, keyOf(room));
    expect((doc!.getMap('content').get('title') as Y.Text).toString()).toBe(`Late ${x.text('title').toString()}`);
    const [state] = await sql`select gen::int from collab_state where room = ${keyOf(room)}`;
    expect(state!.gen).toBe(1);
    // The next compaction merges the late row too.
    const again = await compactor.compact(keyOf(room));
    expect(again?.won).toBe(true);
    expect((await rows(room)).n).toBe(0);
  }, 30_000);

  test('a compaction deletes the rows it read, no others; of two compactions of one generation only the first commits', async () => {
    // What a compactor does (compactor-worker.ts), in steps taken apart.
    const merge = (s: StoredDoc) => {
      const d = new Y.Doc();
      Y.applyUpdate(d, s.state);
      for (const u of s.updates) Y.applyUpdate(d, u);
      return { state: Y.encodeStateAsUpdate(d), sv: Y.encodeStateVector(d) };
    };
    const commit = (s: StoredDoc, room: string) => {
      const m = merge(s);
      return commitCompaction(sql as never, keyOf(room), s.gen, m.state, m.sv, s.seqs);
    };
    for (const order of ['early first', 'later first'] as const) {
      const id = await create('Article', 'Race');
      const room = roomOf('article', id);
      const x = on(room);
      await synced(x);
      x.text('title').insert(0, 'one ');
      await storedMatches(room, x);
      const early = (await loadStored(sql as never, keyOf(room)))!;
      // A save lands while that compaction merges.
      x.text('title').insert(0, 'two ');
      await storedMatches(room, x);
      const later = (await loadStored(sql as never, keyOf(room)))!;
      expect(later.seqs.length).toBe(early.seqs.length + 1);
      if (order === 'early first') {
        expect(await commit(early, room)).toBe(true);
        // The row of "two " was not read: it stays.
        expect((await rows(room)).n).toBe(1);
        expect(await commit(later, room)).toBe(false);
      } else {
        expect(await commit(later, room)).toBe(true);
        // Committed now, the earlier read would put back a state without "two ".
        expect(await commit(early, room)).toBe(false);
        expect((await rows(room)).n).toBe(0);
      }
      expect(await stored(room)).toEqual(x.content.toJSON());
      expect((x.content.get('title') as Y.Text).toString()).toStartWith('two one ');
    }
  }, 30_000);

  test('a killed worker: its compaction is skipped, the next one runs on a new worker, nothing is lost', async () => {
    const id = await create('Note', 'Kill');
    const room = roomOf('note', id);
    const x = on(room);
    await synced(x);
    for (let i = 0; i < 4; i++) {
      x.text('title').insert(0, `${i}`);
      await Bun.sleep(60);
    }
    await storedMatches(room, x);
    const compactor = server.svc.collab.compactor!;
    const { workers, failures } = compactor.stats;
    const release = await blockCompaction(room);
    const running = compactor.compact(keyOf(room));
    await compactorWaiting();
    compactor.kill();
    expect(await running).toBeNull();
    await release();
    expect(compactor.stats.failures).toBe(failures + 1);
    // Editing goes on meanwhile; after the back-off a new worker compacts.
    x.text('title').insert(0, 'after ');
    await storedMatches(room, x);
    await Bun.sleep(60);
    const next = await compactor.compact(keyOf(room));
    expect(next?.won).toBe(true);
    expect(compactor.stats.workers).toBe(workers + 1);
    expect((await rows(room)).n).toBe(0);
    expect(await stored(room)).toEqual(x.content.toJSON());
  }, 30_000);
});
