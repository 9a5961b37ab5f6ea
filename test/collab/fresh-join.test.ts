import { describe, expect, test } from 'bun:test';
import * as Y from 'yjs';
import { eventually } from '../support/eventually.ts';
import { collabFile, roomOf, synced, twoProcesses, type Editor } from './support.ts';

/**
 * Joiners with nothing yet (a new editor, the Studio opening a record) of a large document are
 * answered from the room's kept full state and the updates made since it was encoded
 * (src/collab/room-sync.ts #full), not by encoding the whole document per joiner: each one must
 * still get exactly the document the editors have, through every way the kept state is used,
 * renewed and dropped.
 */
const file = collabFile('fresh-join');
const ed = (room: string) => file.ed(room);

async function note(): Promise<string> {
  const r = await file.p.gql(file.key, 'mutation { createNote(data: { title: "Big" }) { _id } }');
  return r.body.data.createNote._id;
}

/** A joiner with an empty document, once synced: its body and its whole state. */
async function freshJoin(room: string): Promise<Editor> {
  const e = ed(room);
  await synced(e);
  return e;
}

const same = (a: Editor, b: Editor) =>
  a.text('body')?.toString() === b.text('body')?.toString() &&
  Buffer.from(Y.encodeStateVector(a.doc)).equals(Buffer.from(Y.encodeStateVector(b.doc)));

describe('joiners of a large document with nothing yet', () => {
  test('get the document as the editors have it: kept state, the edits made since, its renewal after 1 MiB of them', async () => {
    const room = roomOf('note', await note());
    const a = ed(room);
    await synced(a);
    // ~300 KB of Yjs state: past the 256 KiB from which the full state is kept.
    a.doc.transact(() => {
      if (!a.content.get('body')) a.content.set('body', new Y.Text());
    });
    a.text('body').insert(0, 'x'.repeat(300_000));
    const b = await freshJoin(room);
    await eventually(() => same(a, b), 10_000);

    // Edits after the first fresh joiner: the next one gets the kept state plus these.
    for (let i = 0; i < 20; i++) a.text('body').insert(i * 7, `edit ${i} `);
    a.text('body').delete(1_000, 5_000);
    await eventually(() => same(a, b), 10_000);
    const c = await freshJoin(room);
    await eventually(() => same(a, c), 10_000);
    expect(c.text('body').toString()).toStartWith('edit 0');

    // Past 1 MiB of edits since, the kept state is dropped and encoded anew for the next one.
    // (A field holds at most 1,000,000 characters: pasted and cut again.)
    for (const ch of ['y', 'z']) {
      a.text('body').insert(0, ch.repeat(400_000));
      a.text('body').delete(0, 400_000);
    }
    a.text('body').insert(10, 'w'.repeat(400_000));
    await eventually(() => same(a, b) && same(a, c), 15_000);
    const d = await freshJoin(room);
    await eventually(() => same(a, d), 15_000);
    expect(d.text('body').length).toBe(a.text('body').length);

    // A joiner's own edits reach the others, and the next fresh joiner has them too.
    d.text('body').insert(0, 'from d ');
    await eventually(() => same(a, d) && same(b, d), 10_000);
    const e = await freshJoin(room);
    await eventually(() => same(e, d), 10_000);
    expect(e.text('body').toString()).toStartWith('from d edit 0');
  }, 60_000);

  test('two processes: edits relayed from the other process after the state was kept reach the next fresh joiner', async () => {
    const two = await twoProcesses('fresh-join-two');
    try {
      const r = await two.p.gql(two.key, 'mutation { createNote(data: { title: "Big" }) { _id } }');
      const room = roomOf('note', r.body.data.createNote._id);
      const a = two.on(two.a.gatewayUrl, room);
      await synced(a);
      a.doc.transact(() => a.content.set('body', new Y.Text('x'.repeat(300_000))));
      const first = two.on(two.a.gatewayUrl, room);
      await synced(first);
      await eventually(() => same(a, first), 10_000);
      // An editor on the other process: its edits reach process A's room through the relay.
      const b = two.on(two.bUrl, room);
      await synced(b);
      await eventually(() => same(a, b), 10_000);
      b.text('body').insert(0, 'from the other process ');
      b.text('body').delete(100, 1_000);
      await eventually(() => same(a, b), 10_000);
      const next = two.on(two.a.gatewayUrl, room);
      await synced(next);
      await eventually(() => same(next, b), 10_000);
      expect(next.text('body').toString()).toStartWith('from the other process x');
    } finally {
      await two.stop();
    }
  }, 60_000);
});
