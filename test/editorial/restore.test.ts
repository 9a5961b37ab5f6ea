import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { gqlProject, startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { MODELS, editor, roomOf, synced, type Editor } from '../collab/support.ts';

let server: TestServer;
let p: GqlProject;
let key: string;
const open: Editor[] = [];

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'restore'));
}, 60_000);
afterAll(async () => {
  for (const e of open) e.close();
  await server.stop();
}, 60_000);

async function ok(query: string, variables: Record<string, unknown> = {}, k = key): Promise<any> {
  const r = await p.gql(k, query, variables);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
}

async function history(id: string): Promise<any[]> {
  return (await ok('query($id:ID!){ recordVersions(_id:$id){ version action locale content restoredFrom } }', { id }))
    .recordVersions;
}

async function draft(id: string): Promise<any> {
  return (await ok('query($id:ID!){ article(_id:$id, preview:true){ title body views } }', { id })).article;
}

describe('restore a version', () => {
  test('the version’s content becomes a new working version, history names where it came from', async () => {
    const id = (await ok('mutation{ createArticle(data:{ title:"One", views: 1 }){ _id } }')).createArticle._id;
    await ok('mutation($id:ID!){ updateArticle(_id:$id, data:{ title:"Two", body:"<p>b</p>" }){ _id } }', { id });
    await ok('mutation($id:ID!){ publishArticleVersion(_id:$id){ _id } }', { id });
    await ok('mutation($id:ID!){ updateArticle(_id:$id, data:{ title:"Three", views: 3 }){ _id } }', { id });
    await ok('mutation($id:ID!){ updateArticle(_id:$id, locale:"de", data:{ title:"Drei" }){ _id } }', { id });

    const r = await ok(
      'mutation($id:ID!){ restoreArticleVersion(_id:$id, version: 2){ _id title body views _hasDraft } }',
      { id },
    );
    expect(r.restoreArticleVersion).toMatchObject({
      _id: id,
      title: 'Two',
      body: '<p>b</p>',
      views: 1,
      _hasDraft: true,
    });
    expect(await draft(id)).toEqual({ title: 'Two', body: '<p>b</p>', views: 1 });
    // The German locale did not exist at version 2: it is gone from the working version.
    const de = (await ok('query($id:ID!){ article(_id:$id, preview:true, locale:"de"){ title } }', { id })).article;
    expect(de.title).toBe('Two');
    // Live content is untouched until published.
    expect((await ok('query($id:ID!){ article(_id:$id){ title } }', { id })).article.title).toBe('Two');

    const h = await history(id);
    expect(h.map((v) => v.action)).toEqual(['created', 'updated', 'published', 'updated', 'updated', 'restored']);
    expect(h[5]).toMatchObject({
      version: 6,
      restoredFrom: 2,
      content: { en: { title: 'Two', body: '<p>b</p>', views: 1 } },
    });
    // A restore is history too: restoring version 5 (after the German write) brings both locales back.
    await ok('mutation($id:ID!){ restoreRecordVersion(_id:$id, version: 5){ _id } }', { id });
    expect(await draft(id)).toEqual({ title: 'Three', body: '<p>b</p>', views: 3 });
    const de2 = (await ok('query($id:ID!){ article(_id:$id, preview:true, locale:"de"){ title } }', { id })).article;
    expect(de2.title).toBe('Drei');
    // And restoring the restore entry itself gives version 2's content again.
    await ok('mutation($id:ID!){ restoreArticleVersion(_id:$id, version: 6){ _id } }', { id });
    expect(await draft(id)).toEqual({ title: 'Two', body: '<p>b</p>', views: 1 });
  }, 30_000);

  test('bad input: unknown version, unknown record, another project’s record, no scope — clear codes, nothing changed', async () => {
    const id = (await ok('mutation{ createArticle(data:{ title:"Keep" }){ _id } }')).createArticle._id;
    const codes = async (q: string, vars: Record<string, unknown>, k = key) => {
      const r = await p.gql(k, q, vars);
      return r.body.errors?.map((e: any) => e.extensions?.code);
    };
    const restore = 'mutation($id:ID!, $v:Int!){ restoreArticleVersion(_id:$id, version:$v){ _id } }';
    expect(await codes(restore, { id, v: 2 })).toEqual(['BAD_USER_INPUT']);
    expect(await codes(restore, { id, v: 0 })).toEqual(['BAD_USER_INPUT']);
    expect(await codes(restore, { id, v: -5 })).toEqual(['BAD_USER_INPUT']);
    expect(await codes(restore, { id: 'rec_nope', v: 1 })).toEqual(['NOT_FOUND']);
    expect(
      await codes('mutation($id:ID!){ restoreRecordVersion(_id:$id, version:1){ _id } }', { id: 'rec_nope' }),
    ).toEqual(['NOT_FOUND']);
    const other = await gqlProject(server, MODELS, 'other');
    const otherKey = await other.key('sk', ['records:read', 'records:write', 'drafts:read']);
    const r = await other.gql(otherKey, restore, { id, v: 1 });
    expect(r.body.errors[0].extensions.code).toBe('NOT_FOUND');
    const readOnly = await p.key('sk', ['records:read', 'drafts:read']);
    const denied = await p.gql(readOnly, restore, { id, v: 1 });
    expect(denied.body.errors[0].message).toBe('missing required scope: records:write');
    expect((await history(id)).length).toBe(1);
    expect((await draft(id)).title).toBe('Keep');
  }, 30_000);

  test('a live collaboration room gets the restored content as one update, presence kept', async () => {
    const id = (await ok('mutation{ createArticle(data:{ title:"Original title", views: 1 }){ _id } }')).createArticle
      ._id;
    await ok('mutation($id:ID!){ updateArticle(_id:$id, data:{ title:"Edited title", views: 2 }){ _id } }', { id });
    const a = editor(server.gatewayUrl, roomOf('article', id), { apiKey: key });
    const b = editor(server.gatewayUrl, roomOf('article', id), { apiKey: key });
    open.push(a, b);
    await synced(a, b);
    a.provider.awareness.setLocalStateField('user', { name: 'Ada' });
    await eventually(
      () => [...b.provider.awareness.getStates().values()].some((s: any) => s.user?.name === 'Ada'),
      10_000,
    );
    expect(b.text('title').toString()).toBe('Edited title');
    let updates = 0;
    b.doc.on('update', () => updates++);
    const connectsBefore = b.provider.wsconnected;
    await ok('mutation($id:ID!){ restoreArticleVersion(_id:$id, version: 1){ _id } }', { id });
    await eventually(() => b.text('title').toString() === 'Original title' && b.content.get('views') === 1, 10_000);
    expect(a.text('title').toString()).toBe('Original title');
    // One Yjs update carried the whole restore; no reconnect, the other editor is still there.
    await Bun.sleep(300);
    expect(updates).toBe(1);
    expect(connectsBefore).toBe(true);
    expect(b.provider.wsconnected).toBe(true);
    expect([...b.provider.awareness.getStates().values()].some((s: any) => s.user?.name === 'Ada')).toBe(true);
  }, 30_000);

  test('an unversioned model restores live content too', async () => {
    const id = (await ok('mutation{ createNote(data:{ title:"n1", stars: 1 }){ _id } }')).createNote._id;
    await ok('mutation($id:ID!){ updateNote(_id:$id, data:{ title:"n2" }){ _id } }', { id });
    await ok('mutation($id:ID!){ restoreNoteVersion(_id:$id, version:1){ _id } }', { id });
    expect((await ok('query($id:ID!){ note(_id:$id){ title stars } }', { id })).note).toEqual({
      title: 'n1',
      stars: 1,
    });
  }, 30_000);
});
