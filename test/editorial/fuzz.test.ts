import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { MODELS } from '../collab/support.ts';
import { replay } from '../../src/editorial/restore.ts';

/**
 * fast-check over the editorial inputs (restore, schedule, cancel, list, the audit endpoint and
 * request metadata): NUL bytes, lone surrogates, non-ASCII text, huge and deeply nested values.
 * Every answer is a 2xx/4xx with a stable code, never INTERNAL_SERVER_ERROR, and nothing is
 * stored by a refused request.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261128);
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const STABLE = new Set([
  'BAD_USER_INPUT',
  'NOT_FOUND',
  'CONFLICT',
  'PERMISSION_DENIED',
  'GRAPHQL_VALIDATION_FAILED',
  'GRAPHQL_PARSE_FAILED',
  'PAYLOAD_TOO_LARGE',
]);

let server: TestServer;
let p: GqlProject;
let key: string;
let id: string;

const nasty = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 50 }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\uD800',
    'x\uDFFFy',
    'Ünïcödé ✓ 中文',
    '9999-99-99T99:99:99Z',
    '1970-01-01T00:00:00Z',
    '+275760-09-13T00:00:00.000Z',
    'sch_' + '0'.repeat(24),
    '',
  ),
  fc.string({ minLength: 5000, maxLength: 20000 }),
);
const anyValue = fc.oneof(
  nasty,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 5 }),
  fc.constant(JSON.parse('['.repeat(200) + ']'.repeat(200))),
  fc.dictionary(nasty, fc.integer(), { maxKeys: 4 }),
);

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'edfuzz'));
  id = (await p.gql(key, 'mutation{ createArticle(data:{ title:"fuzz" }){ _id } }')).body.data.createArticle._id;
}, 60_000);
afterAll(() => server.stop(), 60_000);

function stable(r: { status: number; body: any }): void {
  expect(r.status).toBeLessThan(500);
  for (const e of r.body?.errors ?? []) {
    if (e.message?.startsWith('missing required scope')) continue;
    expect(STABLE.has(e.extensions?.code)).toBe(true);
  }
}

describe('editorial fuzz', () => {
  test('GraphQL: restore, schedule, cancel and list with arbitrary arguments', async () => {
    const before = await server.svc
      .sql`select (select count(*)::int from scheduled_actions) as s, (select count(*)::int from record_versions where record_id = ${id}) as v`;
    const docs = [
      'mutation($id:ID!,$v:Int!){ restoreArticleVersion(_id:$id, version:$v){ _id } }',
      'mutation($id:ID!,$v:Int!){ restoreRecordVersion(_id:$id, version:$v){ _id } }',
      'mutation($id:ID!,$at:DateTime!,$v:Int){ scheduleArticlePublish(_id:$id, at:$at, version:$v){ id } }',
      'mutation($id:ID!,$at:DateTime!){ scheduleArticleUnpublish(_id:$id, at:$at){ id } }',
      'mutation($id:ID!){ cancelScheduledAction(id:$id){ id } }',
      'query($f:Int,$a:String,$m:String){ scheduledActions(first:$f, after:$a, modelKey:$m){ totalCount } }',
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...docs),
        fc.record({
          id: fc.oneof(fc.constant(id), nasty),
          v: anyValue,
          at: anyValue,
          f: anyValue,
          a: anyValue,
          m: anyValue,
        }),
        async (doc, vars) => {
          // Past dates only: a fuzzed schedule must never be stored.
          const at = typeof vars.at === 'string' && Date.parse(vars.at) > Date.now() ? '2000-01-01T00:00:00Z' : vars.at;
          const v = vars.v === 1 ? 2 : vars.v; // version 1 exists: a restore of it would succeed
          const r = await p.gql(key, doc, { ...vars, at, v });
          stable(r);
        },
      ),
      { seed: SEED, numRuns: RUNS, endOnFailure: !process.env.FUZZ_SHRINK },
    );
    const after = await server.svc
      .sql`select (select count(*)::int from scheduled_actions) as s, (select count(*)::int from record_versions where record_id = ${id}) as v`;
    expect(after).toEqual(before);
  }, 300_000);

  test('the audit endpoint and request metadata', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({ projectId: nasty, since: nasty, actor: nasty, first: nasty, after: nasty }, { requiredKeys: [] }),
        async (q) => {
          const params = new URLSearchParams();
          for (const [k, v] of Object.entries(q)) params.set(k, v as string);
          const res = await fetch(`${server.apiUrl}/v1/control/audit?${params}`, {
            headers: { authorization: `Bearer ${p.ownerKey}` },
          });
          expect(res.status).toBeLessThan(500);
          // 431: a URL too long for the server to read (the runtime refuses it before any route).
          if (res.status === 431) return;
          if (res.status >= 400)
            expect(['BAD_USER_INPUT', 'NOT_FOUND', 'PAYLOAD_TOO_LARGE']).toContain(((await res.json()) as any).error);
          else await res.json();
        },
      ),
      { seed: SEED, numRuns: RUNS, endOnFailure: !process.env.FUZZ_SHRINK },
    );
    // Odd request ids and user agents are stored bounded and clean, or replaced.
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 3000 }), fc.string({ maxLength: 3000 }), async (rid, ua) => {
        const clean = (s: string) => s.replace(/[^\x20-\x7e]/g, '');
        const r = await p.gql(
          key,
          'mutation($id:ID!){ updateArticle(_id:$id, data:{ views: 1 }){ _id } }',
          { id },
          { 'x-request-id': clean(rid), 'user-agent': clean(ua) },
        );
        stable(r);
      }),
      { seed: SEED, numRuns: 40 },
    );
    const rows = await server.svc.sql<
      { m: number; n: number }[]
    >`select max(length(user_agent))::int as m, max(length(request_id))::int as n from audit_log`;
    expect(rows[0]!.m).toBeLessThanOrEqual(512);
    expect(rows[0]!.n).toBeLessThanOrEqual(128);
  }, 300_000);

  test('history replay never throws on arbitrary rows', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            action: fc.constantFrom('created', 'updated', 'published', 'unpublished', 'restored', 'x'),
            locale: fc.option(fc.constantFrom('en', 'de', '')),
            data: fc.option(fc.dictionary(fc.string(), fc.jsonValue())),
            variant_id: fc.option(fc.constantFrom('default', 'v1')),
          }),
          { maxLength: 30 },
        ),
        (rows) => {
          const out = replay(rows as never, 'en');
          expect(typeof out).toBe('object');
        },
      ),
      { seed: SEED, numRuns: 500 },
    );
  });
});
