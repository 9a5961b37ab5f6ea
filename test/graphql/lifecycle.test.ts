import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, startKeyedProject, type GqlProject } from './helpers.ts';
import type { BusEvent } from '../../src/bus/bus.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;

beforeAll(async () => {
  ({ server, p, sk, pk } = await startKeyedProject([
    {
      key: 'blogPost',
      name: 'Blog post',
      fields: [
        { key: 'title', type: 'text', required: true, queryable: true },
        { key: 'body', type: 'richtext' },
        { key: 'rank', type: 'number', queryable: true },
      ],
      lookups: [{ keyBy: ['title'] }],
    },
    { key: 'setting', name: 'Setting', versioned: false, fields: [{ key: 'value', type: 'text', required: true }] },
  ]));
});
afterAll(() => server.stop());

describe('draft, publish, preview', () => {
  test('create makes a draft only; publish makes it visible; unpublish hides it; delete removes it', async () => {
    const events: BusEvent[] = [];
    const off = server.svc.bus.subscribe((e) => e.type === 'record.changed' && events.push(e));
    const c = await p.gql(
      sk,
      `mutation($d: BlogPostInput!) { createBlogPost(naturalKey: "hello", data: $d) { _id title _hasDraft _publishedAt } }`,
      { d: { title: 'Hello', rank: 1 } },
    );
    expect(c.body.errors).toBeUndefined();
    const id = c.body.data.createBlogPost._id;
    expect(c.body.data.createBlogPost).toMatchObject({ title: 'Hello', _hasDraft: true, _publishedAt: null });

    const read = `query($k: String!, $p: Boolean) { blogPost(naturalKey: $k, preview: $p) { _id title } }`;
    expect((await p.gql(pk, read, { k: 'hello' })).body.data.blogPost).toBeNull();
    const prev = await p.gql(sk, read, { k: 'hello', p: true });
    expect(prev.body.data.blogPost.title).toBe('Hello');
    expect(prev.headers.get('cache-control')).toBe('no-store');

    const pub = await p.gql(
      sk,
      `mutation($id: ID!) { publishBlogPostVersion(_id: $id) { _id _hasDraft _publishedAt } }`,
      { id },
    );
    expect(pub.body.data.publishBlogPostVersion._hasDraft).toBe(false);
    const pubRead = await p.gql(pk, read, { k: 'hello' });
    expect(pubRead.body.data.blogPost.title).toBe('Hello');
    expect(pubRead.headers.get('cache-control')).toMatch(/^public, max-age=\d+, stale-while-revalidate=\d+$/);
    expect(pubRead.headers.get('vary')).toBe('x-api-key, X-Project-Id');

    // The working version moves on; the published one stays until the next publish.
    await p.gql(sk, `mutation($id: ID!) { updateBlogPost(_id: $id, data: { title: "Hello v2" }) { _id } }`, { id });
    expect((await p.gql(pk, read, { k: 'hello' })).body.data.blogPost.title).toBe('Hello');
    expect((await p.gql(sk, read, { k: 'hello', p: true })).body.data.blogPost.title).toBe('Hello v2');
    await p.gql(sk, `mutation($id: ID!) { publishBlogPostVersion(_id: $id) { _id } }`, { id });
    expect((await p.gql(pk, read, { k: 'hello' })).body.data.blogPost.title).toBe('Hello v2');

    await p.gql(sk, `mutation($id: ID!) { unpublishBlogPost(_id: $id) { _id } }`, { id });
    expect((await p.gql(pk, read, { k: 'hello' })).body.data.blogPost).toBeNull();
    const del = await p.gql(sk, `mutation($id: ID!) { deleteBlogPost(_id: $id) }`, { id });
    expect(del.body.data.deleteBlogPost).toBe(true);
    expect((await p.gql(sk, read, { k: 'hello', p: true })).body.data.blogPost).toBeNull();
    off();
    expect(events.map((e) => (e as { action: string }).action)).toEqual([
      'created',
      'published',
      'updated',
      'published',
      'unpublished',
      'deleted',
    ]);
    expect(events[0]).toMatchObject({ recordId: id, modelKey: 'blogPost', projectId: p.projectId });
  });

  test('preview without drafts:read is a scope error, never published content', async () => {
    await p.gql(sk, `mutation { a: createBlogPost(naturalKey: "pv", data: { title: "x" }) { _id } }`);
    const noDrafts = await p.gql(
      await p.key('sk', ['records:read']),
      `{ blogPost(naturalKey: "pv", preview: true) { title } }`,
    );
    expect(noDrafts.body.data.blogPost).toBeNull();
    expect(noDrafts.body.errors[0].message).toBe('missing required scope: drafts:read');
    expect(noDrafts.body.errors[0].extensions).toBeUndefined();
  });

  test('required fields are enforced on publish (versioned) and on create (unversioned)', async () => {
    const c = await p.gql(sk, `mutation { createBlogPost(data: { rank: 3 }) { _id } }`);
    const id = c.body.data.createBlogPost._id;
    const pub = await p.gql(sk, `mutation($id: ID!) { publishBlogPostVersion(_id: $id) { _id } }`, { id });
    expect(pub.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(pub.body.errors[0].message).toContain('title');
    const s = await p.gql(sk, `mutation { createSetting(data: {}) { _id } }`);
    expect(s.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const ok = await p.gql(sk, `mutation { createSetting(naturalKey: "site", data: { value: "v" }) { _id value } }`);
    expect(ok.body.data.createSetting.value).toBe('v');
    // One live version: readable by the public key at once.
    expect((await p.gql(pk, `{ setting(naturalKey: "site") { value } }`)).body.data.setting.value).toBe('v');
  });

  test('duplicate natural key is CONFLICT; unknown _id is null on reads and NOT_FOUND on writes', async () => {
    await p.gql(sk, `mutation { createBlogPost(naturalKey: "dup", data: { title: "a" }) { _id } }`);
    const dup = await p.gql(sk, `mutation { createBlogPost(naturalKey: "dup", data: { title: "b" }) { _id } }`);
    expect(dup.body.errors[0].extensions.code).toBe('CONFLICT');
    expect((await p.gql(sk, `{ blogPost(_id: "rec_nope") { _id } }`)).body.data.blogPost).toBeNull();
    const upd = await p.gql(sk, `mutation { updateBlogPost(_id: "rec_nope", data: { title: "x" }) { _id } }`);
    expect(upd.body.errors[0].extensions.code).toBe('NOT_FOUND');
  });

  test('wrong types in data are BAD_USER_INPUT naming the field', async () => {
    const r = await p.gql(sk, `mutation($d: BlogPostInput!) { createBlogPost(data: $d) { _id } }`, { d: { title: 5 } });
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toContain('title');
  });

  test('lookups are arguments of the single read', async () => {
    const c = await p.gql(sk, `mutation { createBlogPost(data: { title: "Looked up" }) { _id } }`);
    await p.gql(sk, `mutation($id: ID!) { publishBlogPostVersion(_id: $id) { _id } }`, {
      id: c.body.data.createBlogPost._id,
    });
    const r = await p.gql(pk, `{ blogPost(title: "Looked up") { _id } }`);
    expect(r.body.data.blogPost._id).toBe(c.body.data.createBlogPost._id);
  });

  test('recordVersions lists who and when', async () => {
    const c = await p.gql(sk, `mutation { createBlogPost(data: { title: "v" }) { _id } }`);
    const id = c.body.data.createBlogPost._id;
    await p.gql(sk, `mutation($id: ID!) { publishBlogPostVersion(_id: $id) { _id } }`, { id });
    const v = await p.gql(
      sk,
      `query($id: ID!) { recordVersions(_id: $id) { version action userId userEmail createdAt content } }`,
      { id },
    );
    expect(v.body.data.recordVersions.map((x: any) => x.action)).toEqual(['created', 'published']);
    expect(v.body.data.recordVersions[0].userId).toMatch(/^key_/);
    // Member emails are for signed-in members (the Studio's History); a key never sees one.
    expect(v.body.data.recordVersions.map((x: any) => x.userEmail)).toEqual([null, null]);
  });

  // Content and history go with their record by a trigger (sql/029_write_pg_cost.sql), no
  // longer by foreign keys: a record's delete, and its project's, still take them along.
  test("deleting a record, or its project, removes the record's content and history", async () => {
    const q = await gqlProject(
      server,
      [
        { key: 'blogPost', name: 'Blog post', fields: [{ key: 'title', type: 'text' }] },
        { key: 'setting', name: 'Setting', versioned: false, fields: [{ key: 'value', type: 'text' }] },
      ],
      'doomed',
    );
    const qsk = await q.key('sk', ALL_SECRET);
    const ids: string[] = [];
    for (const t of ['one', 'two']) {
      const c = await q.gql(qsk, `mutation($t: String) { createBlogPost(data: { title: $t }) { _id } }`, { t });
      const id = c.body.data.createBlogPost._id;
      await q.gql(
        qsk,
        `mutation($id: ID!) { updateBlogPost(_id: $id, locale: "de", data: { title: "zwei" }) { _id } }`,
        { id },
      );
      await q.gql(qsk, `mutation($id: ID!) { publishBlogPostVersion(_id: $id) { _id } }`, { id });
      ids.push(id);
    }
    const s = await q.gql(qsk, `mutation { createSetting(data: { value: "x" }) { _id } }`);
    ids.push(s.body.data.createSetting._id);
    const rows = async (id: string) => {
      const [r] = await server.svc.sql<{ records: number; content: number; versions: number }[]>`
        select (select count(*)::int from records where id = ${id}) as records,
          (select count(*)::int from record_content where record_id = ${id}) as content,
          (select count(*)::int from record_versions where record_id = ${id}) as versions`;
      return r;
    };
    expect(await rows(ids[0]!)).toEqual({ records: 1, content: 4, versions: 3 });
    expect(await rows(ids[2]!)).toEqual({ records: 1, content: 2, versions: 1 });

    const del = await q.gql(qsk, `mutation($id: ID!) { deleteBlogPost(_id: $id) }`, { id: ids[0] });
    expect(del.body.data.deleteBlogPost).toBe(true);
    expect(await rows(ids[0]!)).toEqual({ records: 0, content: 0, versions: 0 });
    expect(await rows(ids[1]!)).toEqual({ records: 1, content: 4, versions: 3 });

    await server.svc.sql`delete from projects where id = ${q.projectId}`;
    for (const id of ids) expect(await rows(id)).toEqual({ records: 0, content: 0, versions: 0 });
    // Other projects keep theirs.
    const [other] = await server.svc.sql<
      { n: number }[]
    >`select count(*)::int as n from record_content where project_id = ${p.projectId}`;
    expect(other!.n).toBeGreaterThan(0);
  });
});
