import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, ALL_SECRET, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { spawnServiceBeside } from '../support/process.ts';
import { sse } from '../realtime/support.ts';
import { MODELS } from '../collab/support.ts';

/**
 * Scheduled publishing across two processes: the test server and a second `all` process on
 * the same database both run the worker, ticking every 20 ms so they race for every action.
 * Each of many actions due at the same instant fires exactly once: one `published` history
 * entry, one `record.published` event, status `done`.
 */
const N = 30;
let server: TestServer;
let p: GqlProject;
let key: string;
let reader: string;
let second: { proc: Subprocess; url: string };

beforeAll(async () => {
  server = await startTestServer({ SVC_SCHEDULED_ACTIONS_TICK_MS: '20' });
  p = await gqlProject(server, MODELS, 'sched-procs');
  key = await p.key('sk', ALL_SECRET);
  reader = await p.key('pk', ['records:read']);
  second = await spawnServiceBeside(server, 'all', {
    SVC_LOG: 'off',
    SVC_READ_POOL: '1',
    SVC_SCHEDULED_ACTIONS_TICK_MS: '20',
  });
}, 60_000);

afterAll(async () => {
  second?.proc.kill('SIGKILL');
  await server.stop();
}, 60_000);

async function ok(url: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as any;
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

describe('two processes', () => {
  test('every scheduled publish fires once, whichever process claims it', async () => {
    const ids: string[] = [];
    for (let i = 0; i < N; i++)
      ids.push(
        (await ok(server.apiUrl, 'mutation($t:String){ createArticle(data:{ title:$t }){ _id } }', { t: `a${i}` }))
          .createArticle._id,
      );
    const events = sse(server.gatewayUrl, 'changes:article', { apiKey: reader });
    try {
      await eventually(() => events.isConnected());
      const at = new Date(Date.now() + 2500).toISOString();
      // Scheduled half through each process: both processes' API and workers take part.
      for (const [i, id] of ids.entries())
        await ok(
          i % 2 ? second.url : server.apiUrl,
          'mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id } }',
          { id, at },
        );
      await eventually(
        async () =>
          (await server.svc.sql`select count(*)::int as n from scheduled_actions where status = 'done'`)[0]!.n === N,
        20_000,
      );
      await eventually(() => events.events.filter((e) => e.event === 'record.published').length >= N, 10_000);
      await Bun.sleep(500); // a double would arrive by now
      const published = events.events.filter((e) => e.event === 'record.published').map((e) => e.data.recordId);
      expect(published.length).toBe(N);
      expect(new Set(published)).toEqual(new Set(ids));
      const rows = await server.svc.sql<{ record_id: string; n: number }[]>`
        select record_id, count(*)::int as n from record_versions where record_id = any(${ids}) and action = 'published' group by record_id`;
      expect(rows.length).toBe(N);
      expect(rows.every((r) => r.n === 1)).toBe(true);
      // Both processes fired some (they raced), and together exactly N.
      const here = server.svc.scheduledActions!.fired;
      expect(here).toBeLessThanOrEqual(N);
      console.log(`fired by the test process: ${here} of ${N}`);
      // Audit: one entry per fired publish, attributed to the key that scheduled it.
      const audit = await server.svc.sql<
        { n: number }[]
      >`select count(*)::int as n from audit_log where action = 'record.published' and target_id = any(${ids})`;
      expect(audit[0]!.n).toBe(N);
    } finally {
      events.es.close();
    }
  }, 60_000);
});
