import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { gqlProject, startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { contentData, sse } from '../realtime/support.ts';
import { MODELS } from '../collab/support.ts';

let server: TestServer;
let p: GqlProject;
let key: string;
let reader: string;

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'sched'));
  reader = await p.key('pk', ['records:read']);
}, 60_000);
afterAll(() => server.stop(), 60_000);

async function ok(query: string, variables: Record<string, unknown> = {}, k = key): Promise<any> {
  const r = await p.gql(k, query, variables);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
}

const soon = (ms: number) => new Date(Date.now() + ms).toISOString();
const live = async (id: string) => (await ok('query($id:ID!){ article(_id:$id){ title } }', { id }, reader)).article;
const create = async (title: string) =>
  (await ok('mutation($t:String){ createArticle(data:{ title:$t }){ _id } }', { t: title })).createArticle
    ._id as string;
const actionOf = async (id: string) =>
  (
    await ok(
      'query{ scheduledActions(first: 100){ edges { node { id status error at action version recordId modelKey } } } }',
    )
  ).scheduledActions.edges
    .map((e: any) => e.node)
    .find((n: any) => n.id === id);

describe('scheduled publishing', () => {
  test('a scheduled publish fires once at its time: the same event as a manual publish, cached reads dropped', async () => {
    const id = await create('Embargoed');
    expect(await live(id)).toBeNull(); // cached now: the fire must drop it
    const events = sse(server.gatewayUrl, 'changes:article', { apiKey: reader });
    try {
      await eventually(() => events.isConnected());
      const at = soon(1500);
      const s = (
        await ok(
          'mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id action modelKey recordId version at status error } }',
          { id, at },
        )
      ).scheduleArticlePublish;
      expect(s).toMatchObject({
        action: 'publish',
        modelKey: 'article',
        recordId: id,
        version: null,
        at,
        status: 'scheduled',
        error: null,
      });
      await eventually(async () => (await live(id))?.title === 'Embargoed', 10_000);
      const firedAt = Date.now();
      expect(firedAt - Date.parse(at)).toBeGreaterThanOrEqual(-50);
      await eventually(() => events.events.some((e) => e.event === 'record.published'), 10_000);
      expect(events.events.find((e) => e.event === 'record.published')).toEqual({
        channel: 'changes:article',
        event: 'record.published',
        data: contentData(server, {
          modelKey: 'article',
          recordId: id,
          action: 'published',
          userId: expect.any(String),
        }),
      });
      expect((await actionOf(s.id)).status).toBe('done');
      await Bun.sleep(600);
      const h = (await ok('query($id:ID!){ recordVersions(_id:$id){ action } }', { id })).recordVersions;
      expect(h.filter((v: any) => v.action === 'published').length).toBe(1);
    } finally {
      events.es.close();
    }
  }, 30_000);

  test('a publish of a version edited since publishes that version’s content; unpublish; cancel', async () => {
    const id = await create('v1 title');
    await ok('mutation($id:ID!){ updateArticle(_id:$id, data:{ title:"v2 title" }){ _id } }', { id });
    const pub = (
      await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at, version: 1){ id version } }', {
        id,
        at: soon(1200),
      })
    ).scheduleArticlePublish;
    expect(pub.version).toBe(1);
    await ok('mutation($id:ID!){ updateArticle(_id:$id, data:{ title:"v3 title" }){ _id } }', { id });
    await eventually(async () => (await live(id))?.title === 'v1 title', 10_000);
    // The working version stays as edited, and differs from what is live.
    const draft = (await ok('query($id:ID!){ article(_id:$id, preview:true){ title _hasDraft } }', { id })).article;
    expect(draft).toEqual({ title: 'v3 title', _hasDraft: true });

    const un = (
      await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticleUnpublish(_id:$id, at:$at){ id action } }', {
        id,
        at: soon(1000),
      })
    ).scheduleArticleUnpublish;
    expect(un.action).toBe('unpublish');
    await eventually(async () => (await live(id)) === null, 10_000);

    const later = (
      await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id } }', {
        id,
        at: soon(60_000),
      })
    ).scheduleArticlePublish;
    const cancelled = (await ok('mutation($a:ID!){ cancelScheduledAction(id:$a){ id status } }', { a: later.id }))
      .cancelScheduledAction;
    expect(cancelled).toEqual({ id: later.id, status: 'cancelled' });
    const again = await p.gql(key, 'mutation($a:ID!){ cancelScheduledAction(id:$a){ id } }', { a: later.id });
    expect(again.body.errors[0].extensions.code).toBe('CONFLICT');
  }, 30_000);

  test('a scheduled publish whose record cannot be published is marked failed with the reason', async () => {
    const id = await create('Doomed');
    const s = (
      await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id } }', {
        id,
        at: soon(800),
      })
    ).scheduleArticlePublish;
    await ok('mutation($id:ID!){ deleteArticle(_id:$id) }', { id });
    await eventually(async () => (await actionOf(s.id))?.status === 'failed', 10_000);
    expect((await actionOf(s.id)).error).toContain(id);
  }, 30_000);

  test('bad input: a past date, an unknown version, another project’s record, no scope — clear codes, nothing stored', async () => {
    const id = await create('Guarded');
    const before = (await ok('query{ scheduledActions(first: 100){ totalCount } }')).scheduledActions.totalCount;
    const code = async (q: string, v: Record<string, unknown>, k = key) =>
      (await p.gql(k, q, v)).body.errors?.[0]?.extensions?.code;
    const sp = 'mutation($id:ID!,$at:DateTime!,$v:Int){ scheduleArticlePublish(_id:$id, at:$at, version:$v){ id } }';
    expect(await code(sp, { id, at: new Date(Date.now() - 60_000).toISOString() })).toBe('BAD_USER_INPUT');
    expect(await code(sp, { id, at: 'not a date' })).toBe('BAD_USER_INPUT');
    expect(await code(sp, { id, at: soon(60_000), v: 7 })).toBe('BAD_USER_INPUT');
    expect(await code(sp, { id, at: soon(60_000), v: 0 })).toBe('BAD_USER_INPUT');
    expect(await code(sp, { id: 'rec_missing', at: soon(60_000) })).toBe('NOT_FOUND');
    expect(
      await code('mutation($id:ID!,$at:DateTime!){ scheduleNotePublish(_id:$id, at:$at){ id } }', {
        id,
        at: soon(60_000),
      }),
    ).toBe('NOT_FOUND');
    const other = await gqlProject(server, MODELS, 'sched-other');
    const otherKey = await other.key('sk', ['records:read', 'records:write', 'records:publish', 'drafts:read']);
    expect((await other.gql(otherKey, sp, { id, at: soon(60_000) })).body.errors[0].extensions.code).toBe('NOT_FOUND');
    expect(
      (await other.gql(otherKey, 'mutation{ cancelScheduledAction(id:"sch_000000000000000000000000"){ id } }')).body
        .errors[0].extensions.code,
    ).toBe('NOT_FOUND');
    const writer = await p.key('sk', ['records:read', 'records:write', 'drafts:read']);
    expect((await p.gql(writer, sp, { id, at: soon(60_000) })).body.errors[0].message).toBe(
      'missing required scope: records:publish',
    );
    expect((await ok('query{ scheduledActions(first: 100){ totalCount } }')).scheduledActions.totalCount).toBe(before);
    // A page cursor that is not one.
    expect(await code('query{ scheduledActions(first: 5, after: "nope"){ totalCount } }', {})).toBe('BAD_USER_INPUT');
    // A time JavaScript parses and PostgreSQL does not.
    const far = Buffer.from(`+275760-09-13T00:00:00.000Z|sch_${'0'.repeat(24)}`).toString('base64url');
    expect(await code(`query{ scheduledActions(first: 5, after: "${far}"){ totalCount } }`, {})).toBe('BAD_USER_INPUT');
  }, 30_000);

  test('scheduledActions pages soonest first and filters by model', async () => {
    const ids = [await create('p1'), await create('p2'), await create('p3')];
    for (const [i, id] of ids.entries())
      await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id } }', {
        id,
        at: soon(3_600_000 * (3 - i)),
      });
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page: any = (
        await ok(
          'query($a:String){ scheduledActions(first: 2, after:$a, modelKey:"article"){ edges { cursor node { recordId at status } } pageInfo { hasNextPage endCursor } } }',
          { a: after },
        )
      ).scheduledActions;
      seen.push(...page.edges.filter((e: any) => e.node.status === 'scheduled').map((e: any) => e.node.recordId));
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    expect(seen.slice(-3)).toEqual([ids[2]!, ids[1]!, ids[0]!]);
    expect((await ok('query{ scheduledActions(modelKey:"note"){ totalCount } }')).scheduledActions.totalCount).toBe(0);
  }, 30_000);
});

describe('other due work on the same tick (`also`: the release clock)', () => {
  test('runs on every tick of the worker, after its actions; a run that throws stops neither the actions nor the next runs', async () => {
    const worker = server.svc.scheduledActions!;
    const seen: Date[] = [];
    worker.also('probe', async (now) => {
      seen.push(now);
      if (seen.length === 1) throw new Error('the first run fails');
    });
    const id = await create('Beside the probe');
    await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id } }', { id, at: soon(800) });
    await eventually(async () => (await live(id))?.title === 'Beside the probe', 10_000);
    // Counted in runs, not in elapsed time: the worker ticks every 250 ms.
    await eventually(() => seen.length >= 4, 10_000);
    expect(worker.log.failures).toBe(0);
    // Each run is told the time of its tick.
    for (const [i, t] of seen.entries()) if (i > 0) expect(t.getTime()).toBeGreaterThanOrEqual(seen[i - 1]!.getTime());
  }, 30_000);
});
