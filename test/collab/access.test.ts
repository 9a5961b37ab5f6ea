import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, ALL_SECRET, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { MODELS, editor, roomOf, synced, tryJoin, type Editor } from './support.ts';

let server: TestServer;
let p: GqlProject;
let other: GqlProject;
let key: string;
let note: string;
let article: string;
const open: Editor[] = [];

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, MODELS, 'access');
  other = await gqlProject(server, MODELS, 'elsewhere');
  key = await p.key('sk', ALL_SECRET);
  const mk = async (proj: GqlProject, k: string, T: string) => {
    const r = await proj.gql(k, `mutation { create${T}(data: { title: "t" }) { _id } }`);
    return r.body.data[`create${T}`]._id as string;
  };
  note = await mk(p, key, 'Note');
  article = await mk(p, key, 'Article');
}, 60_000);
afterAll(async () => {
  for (const e of open) e.close();
  await server.stop();
}, 60_000);

describe('joining a room', () => {
  test('refusals are plain HTTP answers: 400, 401, 403, 404', async () => {
    const j = (room: string, params: Record<string, string>) => tryJoin(server.gatewayUrl, room, params);
    expect((await j('note:bad id:default', { apiKey: key })).status).toBe(400);
    expect((await j(roomOf('note', note), {})).status).toBe(401);
    expect((await j(roomOf('note', note), { apiKey: 'sk_nope' })).status).toBe(401);
    // Write access is needed: a public key, a key without records:write, a key whose allow-list lacks the model.
    const pk = await p.key('pk', ['records:read']);
    expect((await j(roomOf('article', article), { apiKey: pk })).status).toBe(403);
    const noWrite = await p.key('sk', ['records:read']);
    expect((await j(roomOf('article', article), { apiKey: noWrite })).status).toBe(403);
    const notes = await p.key('sk', ['records:read', 'records:write', 'drafts:read'], ['note']);
    expect((await j(roomOf('article', article), { apiKey: notes })).status).toBe(403);
    // A model that does not exist, a record of another project, a deleted record.
    expect((await j(`nothing:${note}:default`, { apiKey: key })).status).toBe(404);
    const foreignKey = await other.key('sk', ALL_SECRET);
    const foreign = await other.gql(foreignKey, `mutation { createNote(data: { title: "theirs" }) { _id } }`);
    expect((await j(roomOf('note', foreign.body.data.createNote._id), { apiKey: key })).status).toBe(404);
    const gone = await p.gql(key, `mutation { createNote(data: { title: "gone" }) { _id } }`);
    await p.gql(key, `mutation($id: ID!) { deleteNote(_id: $id) }`, { id: gone.body.data.createNote._id });
    const r = await j(roomOf('note', gone.body.data.createNote._id), { apiKey: key });
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('NOT_FOUND');
  });

  test('without write access a join is refused with 403 (spec error table); readOnly=1 opts in to read-only presence', async () => {
    const reader = await p.key('pk', ['records:read']);
    const refused = await tryJoin(server.gatewayUrl, roomOf('note', note), { apiKey: reader });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain('write access');
    const w = editor(server.gatewayUrl, roomOf('note', note), { apiKey: key });
    const r = editor(server.gatewayUrl, roomOf('note', note), { apiKey: reader, readOnly: '1' });
    open.push(w, r);
    await synced(w, r);
    r.provider.awareness.setLocalStateField('user', { name: 'Reader' });
    await eventually(() => [...w.provider.awareness.getStates().values()].some((s) => s.user?.name === 'Reader'), 5000);
    r.text('title').insert(0, 'IGNORED ');
    w.text('title').insert(1, 'X');
    await eventually(() => r.text('title').toString().includes('tX'), 5000);
    expect(w.text('title').toString()).toBe('tX');
    // A writer that opts in is read-only too: its edits are refused.
    const looker = editor(server.gatewayUrl, roomOf('note', note), { apiKey: key, readOnly: '1' });
    open.push(looker);
    await synced(looker);
    looker.text('title').insert(0, 'NOPE ');
    w.text('title').insert(2, 'Y');
    await eventually(() => looker.text('title').toString().includes('tXY'), 5000);
    expect(w.text('title').toString()).toBe('tXY');
    // Read-only still needs read access: a versioned model without drafts:read stays 403.
    expect(
      (await tryJoin(server.gatewayUrl, roomOf('article', article), { apiKey: reader, readOnly: '1' })).status,
    ).toBe(403);
    w.close();
    r.close();
    looker.close();
  }, 30_000);

  test('more than 10 rooms per identity: 429 with Retry-After and the counts; rejoining a held room does not count', async () => {
    const k = await p.key('sk', ALL_SECRET);
    const ids: string[] = [];
    for (let i = 0; i < 11; i++) {
      const r = await p.gql(k, `mutation { createNote(data: { title: "n${i}" }) { _id } }`);
      ids.push(r.body.data.createNote._id);
    }
    const eds = ids.slice(0, 10).map((id) => editor(server.gatewayUrl, roomOf('note', id), { apiKey: k }));
    open.push(...eds);
    await synced(...eds);
    const refused = await tryJoin(server.gatewayUrl, roomOf('note', ids[10]!), { apiKey: k });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.body).toEqual({ error: 'room_limit_exceeded', limit: 10, held: 10 });
    // A second socket to a room already held is fine.
    const again = editor(server.gatewayUrl, roomOf('note', ids[0]!), { apiKey: k });
    open.push(again);
    await synced(again);
    // Another identity is not affected.
    const b = editor(server.gatewayUrl, roomOf('note', ids[10]!), { apiKey: key });
    open.push(b);
    await synced(b);
    b.close();
    for (const e of eds) e.close();
    again.close();
  }, 30_000);

  test('GET /collab/info names the room, the gateway and the auth parameters', async () => {
    const info = await fetch(`${server.apiUrl}/collab/info?recordId=${note}&modelKey=note`, {
      headers: { 'x-api-key': key },
    });
    expect(info.status).toBe(200);
    expect(await info.json()).toEqual({
      enabled: true,
      readOnly: false,
      wsUrl: server.svc.settings.realtimeUrl,
      roomName: roomOf('note', note),
      auth: { method: 'query-param', params: 'token,apiKey' },
    });
    const pk = await p.key('pk', ['records:read']);
    const ro = await fetch(`${server.apiUrl}/collab/info?recordId=${article}&modelKey=article`, {
      headers: { 'x-api-key': pk },
    });
    expect(((await ro.json()) as { enabled: boolean }).enabled).toBe(false);
    // A read-only key may join only with readOnly=1: info says so.
    const look = await fetch(`${server.apiUrl}/collab/info?recordId=${note}&modelKey=note`, {
      headers: { 'x-api-key': pk },
    });
    expect(await look.json()).toMatchObject({ enabled: false, readOnly: true });
    expect((await fetch(`${server.apiUrl}/collab/info?recordId=${note}&modelKey=note`)).status).toBe(401);
    expect((await fetch(`${server.apiUrl}/collab/info?modelKey=note`, { headers: { 'x-api-key': key } })).status).toBe(
      400,
    );
    expect(
      (await fetch(`${server.apiUrl}/collab/info?recordId=rec_nope&modelKey=note`, { headers: { 'x-api-key': key } }))
        .status,
    ).toBe(404);
  });
});

describe('joining with a customer access token', () => {
  test('token alone: its own record is writable, another record is refused (403), a bad token is 401', async () => {
    const { newId } = await import('../../src/ids.ts');
    const { tokenService } = await import('../../src/identity/tokens.ts');
    const { createSession } = await import('../../src/identity/customer-sessions.ts');
    const customerId = newId('cus');
    await server.svc
      .sql`insert into customers (id, project_id, email) values (${customerId}, ${p.projectId}, ${`c${customerId}@example.com`})`;
    const { accessToken } = await createSession(server.svc.sql, tokenService(server.svc), {
      projectId: p.projectId,
      customerId,
      email: `c${customerId}@example.com`,
      scopes: ['records:read'],
      roles: [],
    });
    const mine = (await p.gql(key, `mutation { createNote(data: { title: "mine" }) { _id } }`)).body.data.createNote
      ._id as string;
    await server.svc.sql`update records set owner_customer_id = ${customerId} where id = ${mine}`;
    const e = editor(server.gatewayUrl, roomOf('note', mine), { token: accessToken });
    open.push(e);
    await synced(e);
    e.text('title').insert(4, '!');
    await eventually(
      () =>
        server.svc.collab.registry
          .peek(`${p.projectId}/${roomOf('note', mine)}`)
          ?.doc.getMap('content')
          .get('title')
          ?.toString() === 'mine!',
      10_000,
    );
    e.close();
    // Not its record, and its role stamps no records:write: read-only needs drafts:read on a versioned model.
    expect((await tryJoin(server.gatewayUrl, roomOf('article', article), { token: accessToken })).status).toBe(403);
    expect((await tryJoin(server.gatewayUrl, roomOf('note', mine), { token: 'not.a.token' })).status).toBe(401);
  }, 30_000);
});
