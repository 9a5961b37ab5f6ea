import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { spawnServiceBeside } from '../support/process.ts';
import { MODELS, editor, roomOf, storedDoc, synced, type Editor } from './support.ts';

/**
 * kill -9 of the process holding a room (docs/collab.md, Persistence): of an unversioned room at
 * most the unsaved edits (the debounce window) are lost — never what a save already put in the
 * record — and the room a new process loads serves exactly the record, so editors who come back
 * (a fresh one, or one whose document still holds the lost keystrokes) converge without doubled
 * or missing text. Of a versioned room, what was stored as the room's Yjs state comes back.
 *
 * The service process runs the rooms; the in-process server here only creates the project and
 * reads the record (GraphQL) and the stored state (SQL), and never opens the rooms.
 */
let a: TestServer;
let p: GqlProject;
let key: string;
const procs: Subprocess[] = [];
const open: Editor[] = [];
const providers: WebsocketProvider[] = [];

beforeAll(async () => {
  a = await startTestServer({ SVC_ROLE: 'api' });
  p = await gqlProject(a, MODELS, 'collab-kill');
  key = await p.key('sk', ALL_SECRET);
}, 60_000);

afterAll(async () => {
  for (const x of providers) x.destroy();
  for (const e of open) e.close();
  for (const proc of procs) if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
  await Promise.all(procs.map((x) => x.exited));
  await a.stop();
}, 60_000);

/** A service process (the gateway role: the rooms) on the test server's database. */
async function start(): Promise<{ proc: Subprocess; url: string }> {
  const s = await spawnServiceBeside(a, 'gateway', { SVC_READ_POOL: '1', SVC_LOG: 'off' }, 60_000);
  procs.push(s.proc);
  return s;
}

async function kill9(proc: Subprocess): Promise<void> {
  proc.kill('SIGKILL');
  await proc.exited;
  expect(proc.signalCode).toBe('SIGKILL');
}

const on = (url: string, room: string) => {
  const e = editor(url, room, { apiKey: key });
  open.push(e);
  return e;
};

/** One update per keystroke, appended, as an editor types. */
function type(e: Editor, field: string, s: string): void {
  for (const ch of s) e.doc.transact(() => e.text(field).insert(e.text(field).length, ch));
}

async function create(T: 'Note' | 'Article', title: string): Promise<string> {
  const r = await p.gql(key, `mutation($t: String!) { create${T}(data: { title: $t }) { _id } }`, { t: title });
  return r.body.data[`create${T}`]._id;
}

/** The record's title (an unversioned note: its working and published content are one). */
async function noteTitle(id: string): Promise<string | undefined> {
  return (await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id })).body.data.record?.content
    ?.title;
}

/** The working version's title of an article. */
async function draftTitle(id: string): Promise<string | undefined> {
  return (await p.gql(key, 'query($id: ID!) { article(_id: $id, preview: true) { content } }', { id })).body.data
    .article?.content?.title;
}

/** The title in a room's stored document (collab_state and collab_log), as a process loading the room reads it. */
async function storedTitle(room: string): Promise<string | undefined> {
  const doc = await storedDoc(a.svc.sql, `${p.projectId}/${room}`);
  if (!doc) return undefined;
  const t = doc.getMap('content').get('title');
  const s = t instanceof Y.Text ? t.toString() : (t as string | undefined);
  doc.destroy();
  return s;
}

/** The same document back in the room through a new process (a browser tab reconnecting to another gateway). */
function rejoin(e: Editor, url: string, room: string): WebsocketProvider {
  e.provider.destroy();
  const provider = new WebsocketProvider(url.replace(/^http/, 'ws'), room, e.doc, {
    params: { apiKey: key },
    disableBc: true,
    maxBackoffTime: 200,
  });
  providers.push(provider);
  return provider;
}

/** `s` holds `saved` and is no more than `full` (keystrokes are appended in order). */
function between(s: string | undefined, saved: string, full: string): void {
  expect(s).toBeString();
  expect(s!.startsWith(saved)).toBe(true);
  expect(full.startsWith(s!)).toBe(true);
}

describe('kill -9 of the process holding a room', () => {
  test('unversioned: what was saved survives, the new room serves the record, a returning editor converges', async () => {
    const id = await create('Note', 'Start');
    const room = roomOf('note', id);
    const first = await start();
    const typer = on(first.url, room);
    const watcher = on(first.url, room);
    await synced(typer, watcher);
    const saved = 'Start one two';
    type(typer, 'title', ' one two');
    // The room saved it into the record (debounce 2 s, cap 10 s).
    await eventually(async () => (await noteTitle(id)) === saved, 30_000);
    const full = `${saved} three four`;
    type(typer, 'title', ' three four');
    // The room has applied the new keystrokes (it relayed them to the other editor): kill it now,
    // inside the debounce window.
    await eventually(() => watcher.text('title').toString() === full, 30_000);
    await kill9(first.proc);
    watcher.close();

    // Nothing the room saved is lost; what the record holds is a state the room had.
    const after = await noteTitle(id);
    between(after, saved, full);

    const second = await start();
    const fresh = on(second.url, room);
    await synced(fresh);
    // The new room serves exactly the record (its stored state was written with the last save).
    expect(fresh.text('title').toString()).toBe(after!);
    expect(await noteTitle(id)).toBe(after!);

    // The editor whose document still holds every keystroke comes back: the lost ones return,
    // once, to everyone and into the record.
    const back = rejoin(typer, second.url, room);
    await eventually(() => back.synced, 30_000);
    await eventually(() => fresh.text('title').toString() === full, 30_000);
    expect(typer.text('title').toString()).toBe(full);
    await eventually(async () => (await noteTitle(id)) === full, 30_000);
  }, 180_000);

  test("versioned: edits stored as the room's state before the kill come back to editors", async () => {
    const id = await create('Article', 'Draft');
    const room = roomOf('article', id);
    const first = await start();
    const typer = on(first.url, room);
    const watcher = on(first.url, room);
    await synced(typer, watcher);
    const stored = 'Draft one two';
    type(typer, 'title', ' one two');
    // The room stored its Yjs state (debounce 2 s, cap 10 s).
    await eventually(async () => (await storedTitle(room)) === stored, 30_000);
    const full = `${stored} three four`;
    type(typer, 'title', ' three four');
    await eventually(() => watcher.text('title').toString() === full, 30_000);
    await kill9(first.proc);
    watcher.close();

    const after = await storedTitle(room);
    between(after, stored, full);
    // Live edits never touch the record.
    expect(await draftTitle(id)).toBe('Draft');

    const second = await start();
    const fresh = on(second.url, room);
    await synced(fresh);
    // The stored edits come back to an editor joining after the restart.
    expect(fresh.text('title').toString()).toBe(after!);

    // The editor with every keystroke in its document comes back: the room converges, once.
    const back = rejoin(typer, second.url, room);
    await eventually(() => back.synced, 30_000);
    await eventually(() => fresh.text('title').toString() === full, 30_000);
    expect(typer.text('title').toString()).toBe(full);
    await eventually(async () => (await storedTitle(room)) === full, 30_000);
    expect(await draftTitle(id)).toBe('Draft');
  }, 180_000);
});
