import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as Y from 'yjs';
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import * as syncProtocol from 'y-protocols/sync';
import type { TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { CollabRooms } from '../../src/collab/rooms.ts';
import { connectSession } from '../../src/store/db.ts';
import type { Conn, RoomSocket } from '../../src/collab/room.ts';
import { MESSAGE_SYNC, syncStep1Frame, updateFrame } from '../../src/collab/protocol.ts';
import type { BusEvent } from '../../src/bus/bus.ts';
import { MODELS, roomOf } from './support.ts';

/**
 * The room actor driven directly (no gateway), with saves that would otherwise wait a minute:
 * what is saved comes from the last disconnect, not from the debounce.
 */
let server: TestServer;
let p: GqlProject;
let key: string;
let rooms: CollabRooms;

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'collab-room'));
  rooms = roomsOn('test-locks', { debounceMs: 60_000, maxWaitMs: 60_000 });
  await rooms.start();
}, 60_000);
afterAll(async () => {
  await rooms.close();
  await server.stop();
}, 60_000);

/** Room actors on the test server's service, their lock sessions in pool `lockPool`, with the given save timing. */
function roomsOn(lockPool: string, timing: { debounceMs: number; maxWaitMs: number }): CollabRooms {
  const svc = server.svc;
  return new CollabRooms(
    {
      sql: svc.sql,
      bus: svc.bus,
      project: async (id) => (await svc.projects.get(id)).snapshot,
      lockSession: (onclose) => connectSession(server.databaseUrl, { pool: lockPool, onclose }),
      writes: svc.writes,
    },
    timing,
  );
}

/** A client speaking y-protocols to the room through a socket stand-in. */
function client(userId: string): { conn: Conn; doc: Y.Doc; closed: number[] } {
  const doc = new Y.Doc();
  const closed: number[] = [];
  const ws: RoomSocket = {
    send(data) {
      const decoder = decoding.createDecoder(data);
      if (decoding.readVarUint(decoder) !== MESSAGE_SYNC) return;
      const reply = encoding.createEncoder();
      syncProtocol.readSyncMessage(decoder, reply, doc, 'server');
    },
    publish() {},
    subscribe() {},
    unsubscribe() {},
    close(code) {
      closed.push(code ?? 0);
    },
  };
  return { conn: { ws, userId, rule: null, awarenessIds: new Set() }, doc, closed };
}

describe('room actor', () => {
  test('the last disconnect saves at once, attributed to the last editor, and frees the room', async () => {
    const created = await p.gql(key, `mutation { createNote(data: { title: "Flush", body: "" }) { _id } }`);
    const id = created.body.data.createNote._id as string;
    const events: BusEvent[] = [];
    const off = server.svc.bus.subscribe(
      (e) => void (e.type === 'record.changed' && e.recordId === id && events.push(e)),
    );
    const { info } = await rooms.resolve(p.projectId, roomOf('note', id));
    const room = await rooms.room(info.key);
    const c = client('editor-1');
    expect(room.join(c.conn)).toBe(true);
    room.frame(c.conn, syncStep1Frame(c.doc));
    await eventually(
      () => (c.doc.getMap('content').get('title') as Y.Text | undefined)?.toString() === 'Flush',
      10_000,
    );
    c.doc.on('update', (u: Uint8Array, origin: unknown) => origin !== 'server' && room.frame(c.conn, updateFrame(u)));
    (c.doc.getMap('content').get('body') as Y.Text).insert(0, 'saved on leave');
    room.leave(c.conn);
    await eventually(() => events.some((e) => e.type === 'record.changed' && e.action === 'updated'), 10_000);
    const ev = events.find((e) => e.type === 'record.changed' && e.action === 'updated');
    expect(ev).toMatchObject({ userId: 'editor-1', modelKey: 'note' });
    const rec = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
    expect(rec.body.data.record.content.body).toBe('saved on leave');
    await eventually(() => !rooms.registry.peek(info.key), 10_000);
    expect(c.closed).toEqual([]);
    off();
  }, 30_000);

  test('a value the model refuses stays in the room and out of the record; the rest is saved', async () => {
    const created = await p.gql(key, `mutation { createNote(data: { title: "Typed", stars: 1 }) { _id } }`);
    const id = created.body.data.createNote._id as string;
    const { info } = await rooms.resolve(p.projectId, roomOf('note', id));
    const room = await rooms.room(info.key);
    const c = client('editor-2');
    room.join(c.conn);
    room.frame(c.conn, syncStep1Frame(c.doc));
    await eventually(() => c.doc.getMap('content').get('stars') === 1, 10_000);
    c.doc.on('update', (u: Uint8Array, origin: unknown) => origin !== 'server' && room.frame(c.conn, updateFrame(u)));
    c.doc.transact(() => {
      c.doc.getMap('content').set('stars', 'lots');
      (c.doc.getMap('content').get('title') as Y.Text).insert(5, ' ok');
    });
    await room.flush();
    const rec = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
    expect(rec.body.data.record.content).toMatchObject({ title: 'Typed ok', stars: 1 });
    room.leave(c.conn);
  }, 30_000);

  test('a room is never unloaded during a save: a save held up by a locked record keeps it loaded, a joiner gets it and types meanwhile, it unloads after with every edit saved', async () => {
    const created = await p.gql(key, `mutation { createNote(data: { title: "Held", body: "" }) { _id } }`);
    const id = created.body.data.createNote._id as string;
    const { info } = await rooms.resolve(p.projectId, roomOf('note', id));
    const room = await rooms.room(info.key);
    const c = client('editor-3');
    room.join(c.conn);
    room.frame(c.conn, syncStep1Frame(c.doc));
    await eventually(() => (c.doc.getMap('content').get('body') as Y.Text | undefined) !== undefined, 10_000);
    c.doc.on('update', (u: Uint8Array, origin: unknown) => origin !== 'server' && room.frame(c.conn, updateFrame(u)));
    (c.doc.getMap('content').get('body') as Y.Text).insert(0, 'typed before the save');
    // Another transaction holds the record row: the save (which locks it first) waits.
    const blocker = await server.svc.sql.reserve();
    try {
      await blocker`begin`;
      await blocker`select 1 from records where id = ${id} for update`;
      room.leave(c.conn);
      const waiting = async () =>
        Number(
          (
            await server.svc
              .sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`
          )[0]!.n,
        );
      const end = Date.now() + 10_000;
      while ((await waiting()) === 0 && Date.now() < end) await Bun.sleep(20);
      expect(await waiting()).toBeGreaterThan(0);
      // No socket is left, but the save is in flight: not idle, the sweep passes it by.
      expect(room.canUnload()).toBe(false);
      expect(await rooms.registry.sweep(Date.now() + 3_600_000)).not.toContain(info.key);
      expect(rooms.registry.peek(info.key)).toBe(room);
      // A joiner meanwhile gets this room, edits included.
      const d = client('editor-4');
      const again = await rooms.room(info.key);
      expect(again).toBe(room);
      expect(again.join(d.conn)).toBe(true);
      again.frame(d.conn, syncStep1Frame(d.doc));
      await eventually(
        () => (d.doc.getMap('content').get('body') as Y.Text | undefined)?.toString() === 'typed before the save',
        10_000,
      );
      // Its keystrokes are applied while the save still waits (they do not queue behind it).
      d.doc.on(
        'update',
        (u: Uint8Array, origin: unknown) => origin !== 'server' && again.frame(d.conn, updateFrame(u)),
      );
      (d.doc.getMap('content').get('body') as Y.Text).insert(21, ', and during it');
      await eventually(
        () => (room.doc.getMap('content').get('body') as Y.Text).toString() === 'typed before the save, and during it',
        10_000,
      );
      expect(await waiting()).toBeGreaterThan(0);
      again.leave(d.conn);
      await blocker`commit`;
    } finally {
      blocker.release();
    }
    // The save completes, then the room unloads.
    await eventually(() => !rooms.registry.peek(info.key), 10_000);
    const rec = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
    expect(rec.body.data.record.content.body).toBe('typed before the save, and during it');
  }, 30_000);

  test('under continuous typing the save comes by the cap (maxWaitMs), not after the typing stops', async () => {
    const svc = server.svc;
    // The debounce (30 s) is longer than this test types (at most 20 s): only the cap can save.
    const capped = roomsOn('test-locks-capped', { debounceMs: 30_000, maxWaitMs: 1_000 });
    await capped.start();
    try {
      const created = await p.gql(key, `mutation { createNote(data: { title: "Typing", body: "" }) { _id } }`);
      const id = created.body.data.createNote._id as string;
      const saved: string[] = [];
      const off = svc.bus.subscribe(
        (e) =>
          void (
            e.type === 'record.changed' &&
            e.recordId === id &&
            e.action === 'updated' &&
            saved.push(e.userId ?? '')
          ),
      );
      const { info } = await capped.resolve(p.projectId, roomOf('note', id));
      const room = await capped.room(info.key);
      const c = client('typist');
      room.join(c.conn);
      room.frame(c.conn, syncStep1Frame(c.doc));
      await eventually(() => c.doc.getMap('content').get('body') !== undefined, 10_000);
      c.doc.on('update', (u: Uint8Array, origin: unknown) => origin !== 'server' && room.frame(c.conn, updateFrame(u)));
      const body = c.doc.getMap('content').get('body') as Y.Text;
      const end = Date.now() + 20_000;
      while (saved.length === 0 && Date.now() < end) {
        body.insert(body.length, 'x');
        await Bun.sleep(100);
      }
      expect(saved).toEqual(['typist']);
      const rec = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
      expect(rec.body.data.record.content.body).toMatch(/^x+$/);
      room.leave(c.conn);
      off();
    } finally {
      await capped.close();
    }
  }, 40_000);
});
