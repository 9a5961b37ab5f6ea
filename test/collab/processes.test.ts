import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import type { GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { roomOf, synced, tryJoin, twoProcesses, type TwoProcesses } from './support.ts';

/**
 * A room whose editors are connected to different processes is one room (CONTRACT §2): updates
 * and awareness cross through PostgreSQL, room status counts every process, one process saves,
 * and a process stopped with SIGTERM saves what its editors typed before it exits.
 */
let a: TestServer;
let bUrl: string;
let b: ReturnType<typeof Bun.spawn>;
let p: GqlProject;
let key: string;
let on: TwoProcesses['on'];
let stop: TwoProcesses['stop'] | undefined;

beforeAll(async () => {
  ({ a, b, bUrl, p, key, on, stop } = await twoProcesses('collab-procs'));
}, 60_000);

afterAll(() => stop?.());

async function create(T: 'Note' | 'Article', title: string): Promise<string> {
  const r = await p.gql(key, `mutation($t: String!) { create${T}(data: { title: $t }) { _id } }`, { t: title });
  return r.body.data[`create${T}`]._id;
}

async function published(id: string): Promise<any> {
  return (await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id })).body.data.record?.content;
}

describe('collaboration across processes', () => {
  test('editors on two processes share one room: edits, presence and room status', async () => {
    const id = await create('Note', 'Shared');
    const x = on(a.gatewayUrl, roomOf('note', id));
    await synced(x);
    x.text('title').insert(6, ' by x');
    const y = on(bUrl, roomOf('note', id));
    await synced(y);
    // y joined after x typed: it gets x's unsaved edit from x's process.
    await eventually(() => y.text('title').toString() === 'Shared by x', 10_000);
    y.text('title').insert(0, 'Y: ');
    await eventually(() => x.text('title').toString() === 'Y: Shared by x', 10_000);
    y.provider.awareness.setLocalStateField('user', { name: 'Yves' });
    await eventually(() => [...x.provider.awareness.getStates().values()].some((s) => s.user?.name === 'Yves'), 10_000);
    for (const url of [a.gatewayUrl, bUrl]) {
      const s = await (await fetch(`${url}/api/collab/room-status/${roomOf('note', id)}`)).json();
      expect(s).toEqual({ exists: true, clients: 2 });
    }
    // One process saves: the record gets both edits once.
    const end = Date.now() + 15_000;
    while ((await published(id))?.title !== 'Y: Shared by x' && Date.now() < end) await Bun.sleep(100);
    expect((await published(id)).title).toBe('Y: Shared by x');
    x.close();
    y.close();
  }, 60_000);

  test('saveCollabDraft through a process without the room saves what editors on another process typed', async () => {
    const id = await create('Article', 'Draft');
    const y = on(bUrl, roomOf('article', id));
    await synced(y);
    y.text('title').insert(5, ' typed on b');
    // Process a has no editor in the room: it opens it for the save and takes b's edits in first.
    expect(a.svc.collab.registry.peek(`${p.projectId}/${roomOf('article', id)}`)).toBeUndefined();
    await eventually(() => y.provider.synced && y.text('title').toString() === 'Draft typed on b', 10_000);
    // Presence is written after the join; the save below must find b as a holder of the room.
    const end = Date.now() + 10_000;
    while (
      ((await (await fetch(`${a.gatewayUrl}/api/collab/room-status/${roomOf('article', id)}`)).json()) as any).clients <
        1 &&
      Date.now() < end
    )
      await Bun.sleep(50);
    const saved = await p.gql(key, 'mutation($r: String!) { saveCollabDraft(roomName: $r) { _id } }', {
      r: roomOf('article', id),
    });
    expect(saved.body.errors).toBeUndefined();
    const draft = (await p.gql(key, 'query($id: ID!) { article(_id: $id, preview: true) { content } }', { id })).body
      .data.article.content;
    expect(draft.title).toBe('Draft typed on b');
    y.close();
  }, 60_000);

  test('a burst of edits on both processes (relayed in batches) converges everywhere and is saved once', async () => {
    const id = await create('Note', 'Burst');
    const eds = [
      on(a.gatewayUrl, roomOf('note', id)),
      on(a.gatewayUrl, roomOf('note', id)),
      on(bUrl, roomOf('note', id)),
      on(bUrl, roomOf('note', id)),
    ];
    await synced(...eds);
    // Both processes count all four editors before anyone types.
    const until = Date.now() + 10_000;
    while (
      ((await (await fetch(`${bUrl}/api/collab/room-status/${roomOf('note', id)}`)).json()) as { clients: number })
        .clients !== 4 &&
      Date.now() < until
    )
      await Bun.sleep(50);
    const PER = 150;
    // Every editor types its own letter, one update per keystroke, as fast as the socket takes them.
    eds.forEach((e, i) => {
      for (let k = 0; k < PER; k++) {
        e.doc.transact(() => {
          const title = e.text('title');
          title.insert(title.length, 'abcd'[i]!);
        });
      }
    });
    const count = (s: string, ch: string) => s.split(ch).length - 1;
    const complete = (s: string) => ['a', 'b', 'c', 'd'].every((ch) => count(s, ch) === PER);
    await eventually(() => eds.every((e) => complete(e.text('title').toString())), 30_000);
    const text = eds[0]!.text('title').toString();
    for (const e of eds) expect(e.text('title').toString()).toBe(text);
    // One saver: the record holds every keystroke once.
    const end = Date.now() + 20_000;
    while ((await published(id))?.title !== text && Date.now() < end) await Bun.sleep(100);
    expect((await published(id)).title).toBe(text);
    for (const e of eds) e.close();
  }, 60_000);

  test('a read-only key is refused (403) on either process; with readOnly=1 it follows edits made on the other, and changes nothing', async () => {
    const id = await create('Note', 'Watched');
    const reader = await p.key('pk', ['records:read']);
    for (const url of [a.gatewayUrl, bUrl]) {
      const refused = await tryJoin(url, roomOf('note', id), { apiKey: reader });
      expect(refused.status).toBe(403);
    }
    const w = on(a.gatewayUrl, roomOf('note', id));
    const r = on(bUrl, roomOf('note', id), { apiKey: reader, readOnly: '1' });
    await synced(w, r);
    r.text('title').insert(0, 'NOPE ');
    w.text('title').insert(7, ' live');
    await eventually(() => r.text('title').toString().endsWith('Watched live'), 10_000);
    expect(w.text('title').toString()).toBe('Watched live');
    for (const url of [a.gatewayUrl, bUrl]) {
      const s = await (await fetch(`${url}/api/collab/room-status/${roomOf('note', id)}`)).json();
      expect(s).toEqual({ exists: true, clients: 2 });
    }
    w.close();
    r.close();
  }, 30_000);

  test('SIGTERM: a process saves what its editors typed before it exits', async () => {
    const id = await create('Note', 'Before');
    const y = on(bUrl, roomOf('note', id));
    const z = on(bUrl, roomOf('note', id));
    await synced(y, z);
    y.text('title').insert(6, ' and after');
    // Acknowledged: the room applied it (it relayed it to the other editor).
    await eventually(() => z.text('title').toString() === 'Before and after', 10_000);
    b.kill('SIGTERM');
    expect(await b.exited).toBe(0);
    expect((await published(id)).title).toBe('Before and after');
  }, 60_000);
});
