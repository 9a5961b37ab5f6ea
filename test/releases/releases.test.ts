import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, startProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { sse } from '../realtime/support.ts';
import type { BusEvent } from '../../src/bus/bus.ts';
import type { ModelDef } from '../../src/projects/types.ts';
import { ReleaseClock } from '../../src/releases/schedule.ts';
import { publishTarget } from '../../src/releases/publish.ts';

/**
 * Releases (docs/releases.md): a named set of record versions across models that goes live in
 * one transaction; reads with `release:` preview it; bad input changes nothing.
 */
export const RELEASE_MODELS: ModelDef[] = [
  {
    key: 'article',
    name: 'Article',
    fields: [
      { key: 'title', type: 'text', required: true, queryable: true },
      { key: 'author', type: 'reference', config: { modelKey: 'author' } },
    ],
  },
  { key: 'author', name: 'Author', fields: [{ key: 'name', type: 'text', required: true }] },
  { key: 'setting', name: 'Setting', versioned: false, fields: [{ key: 'value', type: 'text' }] },
];

let server: TestServer;
let p: GqlProject;
let other: GqlProject;
let sk: string;
let pk: string;
let otherSk: string;

beforeAll(async () => {
  ({ server, p } = await startProject(RELEASE_MODELS, 'rel'));
  other = await gqlProject(server, RELEASE_MODELS, 'rel-other');
  sk = await p.key('sk', ALL_SECRET);
  pk = await p.key('pk', ['records:read']);
  otherSk = await other.key('sk', ALL_SECRET);
}, 60_000);
afterAll(() => server.stop());

const RELEASE = `id name status at error items { modelKey recordId version }`;

async function ok(key: string, query: string, variables?: Record<string, unknown>, proj = p): Promise<any> {
  const r = await proj.gql(key, query, variables);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
}

async function create(
  model: 'Article' | 'Author',
  data: Record<string, unknown>,
  publish = false,
  proj = p,
  key = sk,
): Promise<string> {
  const d = await ok(key, `mutation($d: ${model}Input!) { create${model}(data: $d) { _id } }`, { d: data }, proj);
  const id = d[`create${model}`]._id;
  if (publish) await ok(key, `mutation($id: ID!) { publish${model}Version(_id: $id) { _id } }`, { id }, proj);
  return id;
}

const newRelease = async (name = 'Spring launch', proj = p, key = sk): Promise<string> =>
  (await ok(key, `mutation($n: String!) { createRelease(name: $n) { id status } }`, { n: name }, proj)).createRelease
    .id;

const add = (rel: string, modelKey: string, recordId: string, version?: number, key = sk) =>
  p.gql(
    key,
    `mutation($r: ID!, $m: String!, $id: ID!, $v: Int) { addToRelease(releaseId: $r, modelKey: $m, recordId: $id, version: $v) { ${RELEASE} } }`,
    { r: rel, m: modelKey, id: recordId, v: version ?? null },
  );

const title = async (key: string, id: string, args = ''): Promise<string | null> =>
  (await ok(key, `query($id: ID!) { article(_id: $id${args}) { title } }`, { id })).article?.title ?? null;

describe('a release goes live in one transaction', () => {
  test('create, add across models, preview with release:, publish: events, cache, history', async () => {
    const a1 = await create('Article', { title: 'A1 live' }, true);
    await ok(sk, `mutation($id: ID!) { updateArticle(_id: $id, data: { title: "A1 next" }) { _id } }`, { id: a1 });
    const au = await create('Author', { name: 'Ada' });
    const a2 = await create('Article', { title: 'A2 new' });
    await ok(sk, `mutation($id: ID!, $au: ID!) { updateArticle(_id: $id, data: { author: $au }) { _id } }`, {
      id: a2,
      au,
    });
    const untouched = await create('Article', { title: 'Untouched' }, true);

    const rel = await newRelease();
    for (const [m, id] of [
      ['article', a1],
      ['author', au],
      ['article', a2],
    ] as const) {
      const r = await add(rel, m, id);
      expect(r.body.errors).toBeUndefined();
    }
    const listed = await ok(sk, `{ releases(first: 10) { edges { node { ${RELEASE} } } pageInfo { hasNextPage } } }`);
    const mine = listed.releases.edges.map((e: any) => e.node).find((n: any) => n.id === rel);
    expect(mine).toMatchObject({ name: 'Spring launch', status: 'open', at: null });
    expect(mine.items).toEqual([
      { modelKey: 'article', recordId: a1, version: null },
      { modelKey: 'author', recordId: au, version: null },
      { modelKey: 'article', recordId: a2, version: null },
    ]);

    // Fill the response cache with the live site first.
    expect(await title(pk, a1)).toBe('A1 live');
    expect(await title(pk, a2)).toBeNull();
    // The preview: the release's versions in place, everything else as published, references through the release.
    const preview = await p.gql(
      sk,
      `query($r: ID!) { articles(release: $r, first: 50) { edges { node { _id title author { name } } } } }`,
      { r: rel },
    );
    expect(preview.headers.get('cache-control')).toBe('no-store');
    const byId = new Map(preview.body.data.articles.edges.map((e: any) => [e.node._id, e.node]));
    expect(byId.get(a1)).toMatchObject({ title: 'A1 next' });
    expect(byId.get(a2)).toMatchObject({ title: 'A2 new', author: { name: 'Ada' } });
    expect(byId.get(untouched)).toMatchObject({ title: 'Untouched' });
    expect(await title(sk, a2, `, release: "${rel}"`)).toBe('A2 new');
    const generic = await ok(sk, `query($id: ID!, $r: ID!) { record(_id: $id, release: $r) { content } }`, {
      id: au,
      r: rel,
    });
    expect(generic.record.content).toEqual({ name: 'Ada' });
    // The live site did not move.
    expect(await title(pk, a1)).toBe('A1 live');

    const events: BusEvent[] = [];
    const off = server.svc.bus.subscribe(
      (e) => (e.type === 'record.changed' || e.type === 'release.published') && events.push(e),
    );
    const stream = sse(server.gatewayUrl, 'changes:*', { apiKey: sk, projectId: p.projectId });
    await eventually(() => stream.isConnected(), 10_000);
    const pub = await ok(sk, `mutation($id: ID!) { publishRelease(id: $id) { ${RELEASE} } }`, { id: rel });
    expect(pub.publishRelease.status).toBe('published');
    expect(Date.parse(pub.publishRelease.at)).toBeGreaterThan(Date.now() - 60_000);

    // One committed change per record, the same as a manual publish, then release.published.
    await eventually(() => events.length >= 4, 5_000);
    off();
    expect(
      events
        .filter((e) => e.type === 'record.changed')
        .map((e: any) => [e.recordId, e.action])
        .sort(),
    ).toEqual(
      [
        [a1, 'published'],
        [a2, 'published'],
        [au, 'published'],
      ].sort(),
    );
    expect(events.at(-1)).toMatchObject({
      type: 'release.published',
      projectId: p.projectId,
      releaseId: rel,
      name: 'Spring launch',
      records: 3,
    });
    await eventually(() => stream.events.some((e) => e.event === 'release.published'), 10_000);
    expect(stream.events.find((e) => e.event === 'release.published').data).toMatchObject({
      releaseId: rel,
      records: 3,
    });
    expect(stream.events.filter((e) => e.event === 'record.published').length).toBe(3);
    stream.es.close();

    // Cached reads were dropped: the public key sees the release at once.
    expect(await title(pk, a1)).toBe('A1 next');
    expect(await title(pk, a2)).toBe('A2 new');
    const hist = await ok(sk, `query($id: ID!) { recordVersions(_id: $id) { action } }`, { id: a1 });
    expect(hist.recordVersions.map((v: any) => v.action)).toEqual(['created', 'published', 'updated', 'published']);

    // A published release is closed.
    const again = await p.gql(sk, `mutation($id: ID!) { publishRelease(id: $id) { id } }`, { id: rel });
    expect(again.body.errors[0].extensions.code).toBe('CONFLICT');
    const late = await add(rel, 'article', untouched);
    expect(late.body.errors[0].extensions.code).toBe('CONFLICT');
    expect(
      (await ok(sk, `query($id: ID!) { release(id: $id) { items { recordId } } }`, { id: rel })).release.items,
    ).toHaveLength(3);
  }, 60_000);

  test('a pinned version publishes that version, not the working one', async () => {
    const id = await create('Article', { title: 'v1' });
    await ok(sk, `mutation($id: ID!) { updateArticle(_id: $id, data: { title: "v2" }) { _id } }`, { id });
    await ok(sk, `mutation($id: ID!) { updateArticle(_id: $id, data: { title: "v3" }) { _id } }`, { id });
    const rel = await newRelease('pinned');
    const r = await add(rel, 'article', id, 2);
    expect(r.body.data.addToRelease.items).toEqual([{ modelKey: 'article', recordId: id, version: 2 }]);
    expect(await title(sk, id, `, release: "${rel}"`)).toBe('v2');
    await ok(sk, `mutation($id: ID!) { publishRelease(id: $id) { id } }`, { id: rel });
    expect(await title(pk, id)).toBe('v2');
    const d = await ok(sk, `query($id: ID!) { article(_id: $id, preview: true) { title _hasDraft } }`, { id });
    expect(d.article).toEqual({ title: 'v3', _hasDraft: true });
  }, 30_000);

  test('a record that cannot be published fails the whole release: nothing goes live', async () => {
    const good = await create('Article', { title: 'good' });
    const bad = await create('Article', { title: 'bad' });
    await ok(sk, `mutation($id: ID!) { updateArticle(_id: $id, data: { title: "" }) { _id } }`, { id: bad });
    const rel = await newRelease('broken');
    await add(rel, 'article', good);
    await add(rel, 'article', bad);
    const r = await p.gql(sk, `mutation($id: ID!) { publishRelease(id: $id) { id } }`, { id: rel });
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(await title(pk, good)).toBeNull();
    expect((await ok(sk, `query($id: ID!) { release(id: $id) { status } }`, { id: rel })).release.status).toBe('open');
    // Removing the bad record lets it go.
    const rm = await p.gql(
      sk,
      `mutation($r: ID!, $id: ID!) { removeFromRelease(releaseId: $r, modelKey: "article", recordId: $id) { items { recordId } } }`,
      { r: rel, id: bad },
    );
    expect(rm.body.data.removeFromRelease.items).toEqual([{ recordId: good }]);
    await ok(sk, `mutation($id: ID!) { publishRelease(id: $id) { id } }`, { id: rel });
    expect(await title(pk, good)).toBe('good');
  }, 30_000);
});

describe('the release clock', () => {
  test('publishes only what is due; a scheduled release that cannot go live opens again with the reason', async () => {
    const clock = new ReleaseClock({
      sql: server.svc.sql,
      writes: server.svc.writes,
      target: async (id) => publishTarget((await server.svc.projects.get(id)).snapshot),
    });
    const good = await create('Article', { title: 'on time' });
    const bad = await create('Article', { title: 'will be emptied' });
    const relGood = await newRelease('timed good');
    const relBad = await newRelease('timed bad');
    await add(relGood, 'article', good);
    await add(relBad, 'article', bad);
    const at = new Date(Date.now() + 60_000).toISOString();
    for (const id of [relGood, relBad])
      await ok(sk, `mutation($id: ID!, $at: DateTime!) { scheduleRelease(id: $id, at: $at) { id } }`, { id, at });
    await ok(sk, `mutation($id: ID!) { updateArticle(_id: $id, data: { title: "" }) { _id } }`, { id: bad });
    // Not yet due.
    expect(await clock.tick(new Date(Date.now() + 30_000))).toEqual([]);
    expect(await title(pk, good)).toBeNull();
    // Due: the good one goes live, the bad one is open again with the reason, nothing of it live.
    const fired = await clock.tick(new Date(Date.now() + 61_000));
    expect(fired).toContain(relGood);
    expect(fired).not.toContain(relBad);
    expect(await title(pk, good)).toBe('on time');
    const b = (await ok(sk, `query($id: ID!) { release(id: $id) { status at error } }`, { id: relBad })).release;
    expect(b).toMatchObject({ status: 'open', at: null });
    expect(b.error).toContain('required');
    expect(await title(pk, bad)).toBeNull();
    // A second tick fires nothing again.
    expect(await clock.tick(new Date(Date.now() + 62_000))).toEqual([]);
  }, 30_000);
});

describe('bad input changes nothing', () => {
  test('unknown release, another project, a missing version, closed releases, unversioned models', async () => {
    const id = await create('Article', { title: 'x' });
    const rel = await newRelease('checks');
    const code = (r: { body: any }) => r.body.errors?.[0]?.extensions?.code;
    expect(code(await add('rel_000000000000000000000000', 'article', id))).toBe('NOT_FOUND');
    expect(code(await add('nope', 'article', id))).toBe('NOT_FOUND');
    // A page cursor that is not one, and one whose time JavaScript parses and PostgreSQL does not.
    const list = `query($a: String) { releases(first: 2, after: $a) { pageInfo { hasNextPage } } }`;
    expect(code(await p.gql(sk, list, { a: 'nope' }))).toBe('BAD_USER_INPUT');
    const far = Buffer.from(JSON.stringify(['+275760-09-13T00:00:00.000Z', rel])).toString('base64url');
    expect(code(await p.gql(sk, list, { a: far }))).toBe('BAD_USER_INPUT');
    // Another project's record, and another project's release, are unknown here.
    const foreign = await create('Article', { title: 'foreign' }, false, other, otherSk);
    expect(code(await add(rel, 'article', foreign))).toBe('NOT_FOUND');
    const foreignRel = await newRelease('theirs', other, otherSk);
    expect(code(await add(foreignRel, 'article', id))).toBe('NOT_FOUND');
    expect(code(await p.gql(sk, `mutation($id: ID!) { publishRelease(id: $id) { id } }`, { id: foreignRel }))).toBe(
      'NOT_FOUND',
    );
    expect(
      code(await p.gql(sk, `query($r: ID!) { articles(release: $r) { edges { node { _id } } } }`, { r: foreignRel })),
    ).toBe('NOT_FOUND');
    expect((await ok(sk, `query($id: ID!) { release(id: $id) { id } }`, { id: foreignRel })).release).toBeNull();
    // A model of the wrong kind, a record under the wrong model, a version that does not exist.
    expect(code(await add(rel, 'author', id))).toBe('NOT_FOUND');
    expect(code(await add(rel, 'nosuch', id))).toBe('BAD_USER_INPUT');
    const setting = (await ok(sk, `mutation { createSetting(data: { value: "x" }) { _id } }`)).createSetting._id;
    expect(code(await add(rel, 'setting', setting))).toBe('BAD_USER_INPUT');
    expect(code(await add(rel, 'article', id, 99))).toBe('NOT_FOUND');
    expect(code(await add(rel, 'article', id, 0))).toBe('BAD_USER_INPUT');
    expect(
      code(
        await p.gql(
          sk,
          `mutation($r: ID!) { removeFromRelease(releaseId: $r, modelKey: "article", recordId: "rec_x") { id } }`,
          { r: rel },
        ),
      ),
    ).toBe('NOT_FOUND');
    expect(
      (await ok(sk, `query($id: ID!) { release(id: $id) { items { recordId } } }`, { id: rel })).release.items,
    ).toEqual([]);
    // other's project is untouched
    expect(
      (await ok(otherSk, `query($id: ID!) { release(id: $id) { items { recordId } } }`, { id: foreignRel }, other))
        .release.items,
    ).toEqual([]);

    // Schedules must be in the future.
    expect(
      code(
        await p.gql(sk, `mutation($id: ID!) { scheduleRelease(id: $id, at: "2001-01-01T00:00:00Z") { id } }`, {
          id: rel,
        }),
      ),
    ).toBe('BAD_USER_INPUT');
    expect(
      code(await p.gql(sk, `mutation($id: ID!) { scheduleRelease(id: $id, at: "not a date") { id } }`, { id: rel })),
    ).toBe('BAD_USER_INPUT');

    // A discarded release takes nothing and never goes live.
    const d = await ok(sk, `mutation($id: ID!) { discardRelease(id: $id) { status } }`, { id: rel });
    expect(d.discardRelease.status).toBe('discarded');
    expect(code(await add(rel, 'article', id))).toBe('CONFLICT');
    expect(code(await p.gql(sk, `mutation($id: ID!) { publishRelease(id: $id) { id } }`, { id: rel }))).toBe(
      'CONFLICT',
    );
    expect(
      code(
        await p.gql(sk, `mutation($id: ID!) { scheduleRelease(id: $id, at: "2100-01-01T00:00:00Z") { id } }`, {
          id: rel,
        }),
      ),
    ).toBe('BAD_USER_INPUT');
  }, 30_000);

  test('scopes: records:publish for releases, drafts:read for release reads; public keys have neither', async () => {
    const rel = await newRelease('scoped');
    const readOnly = await p.key('sk', ['records:read', 'records:write']);
    const r = await p.gql(readOnly, `mutation { createRelease(name: "x") { id } }`);
    expect(r.body.errors[0].message).toBe('missing required scope: records:publish');
    const q = await p.gql(readOnly, `{ releases { edges { node { id } } } }`);
    expect(q.body.errors[0].message).toBe('missing required scope: records:publish');
    const noDrafts = await p.gql(readOnly, `query($r: ID!) { articles(release: $r) { edges { node { _id } } } }`, {
      r: rel,
    });
    expect(noDrafts.body.errors[0].message).toBe('missing required scope: drafts:read');
    const pub = await p.gql(pk, `query($r: ID!) { articles(release: $r) { edges { node { _id } } } }`, { r: rel });
    expect(pub.status).toBe(400);
    const both = await p.gql(sk, `query($r: ID!) { articles(release: $r, preview: true) { edges { node { _id } } } }`, {
      r: rel,
    });
    expect(both.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});
