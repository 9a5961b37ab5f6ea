import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { MODELS, editor, roomOf, synced, type Editor } from './support.ts';

let server: TestServer;
let p: GqlProject;
let key: string;
const open: Editor[] = [];
const ed = (room: string, params: Record<string, string> = { apiKey: key }) => {
  const e = editor(server.gatewayUrl, room, params);
  open.push(e);
  return e;
};

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'collab'));
}, 60_000);
afterAll(async () => {
  for (const e of open) e.close();
  await server.stop();
}, 60_000);

async function create(model: 'note' | 'article', data: Record<string, unknown>, k = key): Promise<string> {
  const T = model === 'note' ? 'Note' : 'Article';
  const r = await p.gql(k, `mutation($d: ${T}Input!) { create${T}(data: $d) { _id } }`, { d: data });
  expect(r.body.errors).toBeUndefined();
  return r.body.data[`create${T}`]._id;
}

async function draft(id: string): Promise<any> {
  const r = await p.gql(key, `query($id: ID!) { record(_id: $id, preview: true) { content } }`, { id });
  return r.body.data.record?.content;
}

async function published(id: string): Promise<any> {
  const r = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
  return r.body.data.record?.content;
}

/** Polls an async read until `done` holds (or 15 s pass); returns the last value read. */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  let v = await read();
  while (!done(v) && Date.now() < end) {
    await Bun.sleep(100);
    v = await read();
  }
  return v;
}

async function keyIdOf(k: string): Promise<string> {
  const r = await fetch(`${server.apiUrl}/v1/whoami`, { headers: { 'x-api-key': k } });
  return ((await r.json()) as { keyId: string }).keyId;
}

async function status(room: string): Promise<{ exists: boolean; clients: number }> {
  return (await fetch(`${server.gatewayUrl}/api/collab/room-status/${room}`)).json() as never;
}

describe('collaboration rooms', () => {
  test('two providers converge, seeded from the record; room status counts them', async () => {
    const id = await create('note', { title: 'Hello', body: 'start' });
    const a = ed(roomOf('note', id));
    const b = ed(roomOf('note', id));
    await synced(a, b);
    expect(a.text('title').toString()).toBe('Hello');
    a.text('body').insert(5, ' from a');
    b.text('title').insert(0, '>> ');
    await eventually(
      () => b.text('body').toString() === 'start from a' && a.text('title').toString() === '>> Hello',
      10_000,
    );
    expect(await status(roomOf('note', id))).toEqual({ exists: true, clients: 2 });
    a.close();
    b.close();
  }, 30_000);

  test('awareness: each editor sees the other one’s presence and cursor, and its leaving', async () => {
    const id = await create('note', { title: 'Presence' });
    const a = ed(roomOf('note', id));
    const b = ed(roomOf('note', id));
    await synced(a, b);
    a.provider.awareness.setLocalStateField('user', { name: 'Ada', cursor: 3 });
    await eventually(() => [...b.provider.awareness.getStates().values()].some((s) => s.user?.name === 'Ada'), 10_000);
    a.close();
    await eventually(() => ![...b.provider.awareness.getStates().values()].some((s) => s.user?.name === 'Ada'), 10_000);
  }, 30_000);

  test('a lone editor hears its own presence back, as from y-websocket’s server (its client reconnects after 30 s of silence)', async () => {
    const id = await create('note', { title: 'Alone' });
    const a = ed(roomOf('note', id));
    await synced(a);
    let reconnects = 0;
    a.provider.on('status', (e: { status: string }) => void (e.status === 'connecting' && reconnects++));
    const heard = a.provider.wsLastMessageReceived;
    // y-websocket's awareness renews the local state every 15 s; the server answering it is what keeps
    // the client's 30 s message timeout from closing a socket that only one editor uses.
    a.provider.awareness.setLocalStateField('user', { name: 'Solo' });
    await eventually(() => a.provider.wsLastMessageReceived > heard, 5_000);
    expect(reconnects).toBe(0);
    expect(a.provider.wsconnected).toBe(true);
  }, 30_000);

  test('unversioned: autosave into the record, attributed to the last editor; flushed on the last disconnect', async () => {
    const other = await p.key('sk', ['records:read', 'records:write', 'drafts:read']);
    const id = await create('note', { title: 'Auto', body: '' });
    const a = ed(roomOf('note', id));
    const b = ed(roomOf('note', id), { apiKey: other });
    await synced(a, b);
    a.text('body').insert(0, 'typed by a');
    await eventually(() => b.text('body').toString() === 'typed by a', 10_000);
    b.text('body').insert(10, ', then b');
    // The debounced save (2 s) lands in the working and the published version.
    let content = await until(
      () => published(id),
      (c) => c.body === 'typed by a, then b',
    );
    expect(content.body).toBe('typed by a, then b');
    const versions = await p.gql(key, `query($id: ID!) { recordVersions(_id: $id) { action userId content } }`, { id });
    const last = versions.body.data.recordVersions.at(-1);
    expect(last.action).toBe('updated');
    expect(last.userId).toBe(await keyIdOf(other));
    // A larger debounce would make the next save come from the disconnect alone: see room.test.ts.
    // An edit followed at once by the last disconnect is saved by the disconnect.
    a.text('title').insert(4, '!');
    await eventually(() => b.text('title').toString() === 'Auto!', 10_000);
    a.close();
    b.close();
    content = await until(
      () => published(id),
      (c) => c.title === 'Auto!',
    );
    expect(content.title).toBe('Auto!');
    await eventually(() => !server.svc.collab.registry.peek(`${p.projectId}/${roomOf('note', id)}`), 10_000);
  }, 30_000);

  test('a GraphQL update of an open room’s record is merged into the room, not overwritten', async () => {
    const id = await create('note', { title: 'Merge', body: 'abc', stars: 1 });
    const a = ed(roomOf('note', id));
    await synced(a);
    const r = await p.gql(
      key,
      `mutation($id: ID!) { updateNote(_id: $id, data: { title: "Merged title", stars: 5 }) { _id } }`,
      { id },
    );
    expect(r.body.errors).toBeUndefined();
    await eventually(() => a.text('title').toString() === 'Merged title' && a.content.get('stars') === 5, 10_000);
    a.text('body').insert(3, 'def');
    const content = await until(
      () => published(id),
      (c) => c.body === 'abcdef',
    );
    expect(content).toMatchObject({ title: 'Merged title', body: 'abcdef', stars: 5 });
  }, 30_000);

  test('versioned: live edits never touch the record; saveCollabDraft then publish', async () => {
    const id = await create('article', { title: 'Draft one', body: 'text' });
    await p.gql(key, `mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }`, { id });
    const a = ed(roomOf('article', id));
    await synced(a);
    a.text('title').insert(9, ' (edited)');
    a.content.set('views', 7);
    await Bun.sleep(300);
    expect((await draft(id)).title).toBe('Draft one');
    const saved = await p.gql(
      key,
      `mutation($r: String!) { saveCollabDraft(roomName: $r) { _id ... on Article { title views } } }`,
      { r: roomOf('article', id) },
    );
    expect(saved.body.errors).toBeUndefined();
    expect(saved.body.data.saveCollabDraft).toMatchObject({ _id: id, title: 'Draft one (edited)', views: 7 });
    expect(await draft(id)).toMatchObject({ title: 'Draft one (edited)', views: 7 });
    expect((await published(id)).title).toBe('Draft one');
    await p.gql(key, `mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }`, { id });
    expect(await published(id)).toMatchObject({ title: 'Draft one (edited)', views: 7 });
  }, 30_000);
});
