import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import * as Y from 'yjs';
import * as encoding from 'lib0/encoding';
import { updateFrame } from '../../src/collab/protocol.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { MODELS, editor, roomOf, synced, type Editor } from './support.ts';

let server: TestServer;
let p: GqlProject;
let key: string;
const open: Editor[] = [];
const ed = (room: string) => {
  const e = editor(server.gatewayUrl, room, { apiKey: key });
  open.push(e);
  return e;
};

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'collab-recovery'));
}, 60_000);
afterAll(async () => {
  for (const e of open) e.close();
  await server.stop();
}, 60_000);

async function create(T: 'Note' | 'Article', title: string): Promise<string> {
  const r = await p.gql(key, `mutation($t: String!) { create${T}(data: { title: $t }) { _id } }`, { t: title });
  return r.body.data[`create${T}`]._id;
}

/** A raw socket to a room, for frames no y-websocket client would send. */
async function rawSocket(room: string): Promise<{ ws: WebSocket; closed: Promise<{ code: number; reason: string }> }> {
  const ws = new WebSocket(`${server.gatewayUrl.replace(/^http/, 'ws')}/${room}?apiKey=${key}`);
  ws.binaryType = 'arraybuffer';
  const closed = new Promise<{ code: number; reason: string }>((r) =>
    ws.addEventListener('close', (e) => r({ code: e.code, reason: e.reason })),
  );
  await new Promise((r, j) => {
    ws.addEventListener('open', r);
    ws.addEventListener('error', j);
  });
  return { ws, closed };
}

describe('bad input closes the socket, the room and its other editors are unaffected', () => {
  test('malformed and truncated frames, an update that fails to apply, a 10 MB update, text frames: closed, nothing seen or saved', async () => {
    const id = await create('Note', 'Sturdy');
    const good = ed(roomOf('note', id));
    await synced(good);
    // A sync update whose payload is cut short.
    const doc = new Y.Doc();
    doc.getMap('content').set('title', 'evil');
    const update = Y.encodeStateAsUpdate(doc);
    const e = encoding.createEncoder();
    encoding.writeVarUint(e, 0);
    encoding.writeVarUint(e, 2);
    encoding.writeVarUint8Array(e, update.slice(0, update.length - 3));
    const truncated = encoding.toUint8Array(e);
    // An update that decodes but fails to apply: a real edit of the room's text (it types
    // "EVIL" after the room's content) whose delete set names an empty range. Yjs integrates the
    // structs before it reads the delete set, then throws.
    const clone = new Y.Doc();
    Y.applyUpdate(clone, Y.encodeStateAsUpdate(good.doc));
    const sv = Y.encodeStateVector(clone);
    (clone.getMap('content').get('title') as Y.Text).insert(6, 'EVIL');
    const edit = Y.encodeStateAsUpdate(clone, sv);
    expect(edit.at(-1)).toBe(0); // an empty delete set: no clients
    const ds = encoding.createEncoder();
    encoding.writeVarUint(ds, 1); // one client, one the room has never seen
    encoding.writeVarUint(ds, clone.clientID + 1);
    encoding.writeVarUint(ds, 1); // one range
    encoding.writeVarUint(ds, 0); // clock
    encoding.writeVarUint(ds, 0); // length 0
    const failing = new Uint8Array([...edit.slice(0, -1), ...encoding.toUint8Array(ds)]);
    // In plain Yjs it half applies: the structs are in, then it throws.
    const probe = new Y.Doc();
    Y.applyUpdate(probe, Y.encodeStateAsUpdate(good.doc));
    expect(() => Y.applyUpdate(probe, failing)).toThrow();
    expect((probe.getMap('content').get('title') as Y.Text).toString()).toContain('EVIL');
    // A real update of 10 MB (one paste of ten million characters).
    const big = new Y.Doc();
    big.getMap('content').set('body', new Y.Text('x'.repeat(10 * 1024 * 1024)));
    const cases: [Uint8Array | string, number][] = [
      [truncated, 4400],
      [new Uint8Array([0, 2, 200]), 4400],
      [new Uint8Array([9, 1, 2]), 4400],
      [new Uint8Array([1, 5, 1, 2, 3, 4, 5]), 4400],
      ['{"type":"subscribe"}', 4400],
      [updateFrame(failing), 4400],
      [updateFrame(Y.encodeStateAsUpdate(big)), 4413],
      [new Uint8Array(10 * 1024 * 1024), 4413],
    ];
    for (const [frame, code] of cases) {
      const { ws, closed } = await rawSocket(roomOf('note', id));
      ws.send(frame);
      expect((await closed).code).toBe(code);
    }
    good.text('title').insert(6, '!');
    const other = ed(roomOf('note', id));
    await synced(other);
    await eventually(() => other.text('title').toString() === 'Sturdy!', 10_000);
    expect(other.content.get('title')).not.toBe('evil');
    expect(other.content.has('body')).toBe(false);
    // The good editor was never disconnected and never saw any of it.
    expect(good.provider.wsconnected).toBe(true);
    expect(good.text('title').toString()).toBe('Sturdy!');
    // What is saved (the last disconnect saves at once) is the good edit alone.
    good.close();
    other.close();
    await eventually(() => !server.svc.collab.registry.peek(`${p.projectId}/${roomOf('note', id)}`), 10_000);
    const saved = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
    expect(saved.body.data.record.content.title).toBe('Sturdy!');
    expect(saved.body.data.record.content.body ?? null).toBeNull();
  }, 60_000);

  test('deleting the record closes its room with 4404', async () => {
    const id = await create('Note', 'Doomed');
    const { ws, closed } = await rawSocket(roomOf('note', id));
    // The room is open once it greets the socket (sync step 1).
    await new Promise((r) => ws.addEventListener('message', r, { once: true }));
    await p.gql(key, `mutation($id: ID!) { deleteNote(_id: $id) }`, { id });
    expect((await closed).code).toBe(4404);
    ws.close();
  }, 30_000);
});

describe('versioned rooms survive everyone leaving and a restart', () => {
  test('live edits come back to the next editors; the working version is untouched', async () => {
    const id = await create('Article', 'Kept');
    const a = ed(roomOf('article', id));
    await synced(a);
    a.text('title').insert(4, ' live edit');
    a.content.set('views', 3);
    const b = ed(roomOf('article', id));
    await synced(b);
    await eventually(() => b.content.get('views') === 3, 10_000);
    a.close();
    b.close();
    const roomKey = `${p.projectId}/${roomOf('article', id)}`;
    await eventually(() => !server.svc.collab.registry.peek(roomKey), 10_000);
    // Everyone left and the room unloaded: the next editor finds the unsaved edits.
    const back = ed(roomOf('article', id));
    await synced(back);
    await eventually(
      () => back.text('title')?.toString() === 'Kept live edit' && back.content.get('views') === 3,
      10_000,
    );
    back.close();
    await eventually(() => !server.svc.collab.registry.peek(roomKey), 10_000);
    // A restart on the same database.
    await server.stop();
    server = await startTestServer({ DATABASE_URL: server.databaseUrl });
    const c = ed(roomOf('article', id));
    await synced(c);
    await eventually(() => c.text('title')?.toString() === 'Kept live edit' && c.content.get('views') === 3, 10_000);
    // p's helper points at the stopped server: ask the new one.
    const draft = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({
        query: `query($id: ID!) { record(_id: $id, preview: true) { content } }`,
        variables: { id },
      }),
    });
    expect(((await draft.json()) as any).data.record.content.title).toBe('Kept');
    c.close();
  }, 60_000);
});
