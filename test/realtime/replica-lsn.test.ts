import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { skipStandby, type StandbyPair } from '../support/standby.ts';
import { replicaFixture, POST, type ReplicaFixture } from '../support/replica-fixture.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/eventually.ts';
import { ALL_SECRET, gqlProject } from '../graphql/helpers.ts';
import { parseLsn } from '../../src/store/lsn.ts';
import { sse } from './support.ts';

/**
 * Realtime with read replicas (issue 32): a content event names in `data.lsn` a primary WAL
 * position at or past its commit (the bus relay stamps it: sql/053_bus_relay_lsn.sql), so a
 * subscriber that refetches through any process — one that has not heard the event yet
 * included — can present it as `x-svc-lsn` and never reads the content from before the change.
 */
const LSN = /^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/;

async function gql(base: string, key: string, query: string, variables: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as any;
  if (res.status !== 200 || body.errors) throw new Error(`${res.status} ${JSON.stringify(body)}`);
  return { body, headers: res.headers };
}

describe.skipIf(skipStandby())('realtime events with read replicas', () => {
  let pair: StandbyPair;
  let server: TestServer;
  let other: { proc: Subprocess; url: string } | undefined;
  let sk: string;
  let pk: string;
  let id: string;

  let fixture: ReplicaFixture | undefined;

  beforeAll(async () => {
    fixture = await replicaFixture('svc_rt_lsn', (standbyDb) => ({
      DATABASE_READ_URL: standbyDb,
      SVC_REPLICA_POLL_MS: '50',
      SVC_REPLICA_WAIT_MS: '200',
    }));
    ({ pair, server, other, sk, pk, id } = fixture);
  }, 240_000);

  afterAll(() => fixture?.stop(), 60_000);

  test("SSE events of another process's publish carry data.lsn at or past its commit; presented, reads through either process see it with the standby paused", async () => {
    const stream = sse(server.gatewayUrl, 'changes:post', { apiKey: pk });
    const title = async (base: string, lsn: string) =>
      (await gql(base, pk, 'query($id: ID!) { post(_id: $id) { title } }', { id }, { 'x-svc-lsn': lsn })).body.data.post
        .title;
    try {
      await eventually(() => stream.isConnected(), 10_000);
      // Paused, the standby holds the state before each publish for sure.
      await pair.pauseReplay();
      try {
        for (let i = 1; i <= 3; i++) {
          const seen = stream.events.length;
          await gql(
            other!.url,
            sk,
            'mutation($id: ID!, $t: String!) { updatePost(_id: $id, data: { title: $t }) { _id } }',
            {
              id,
              t: `v${i}`,
            },
          );
          const wrote = await gql(other!.url, sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', {
            id,
          });
          const written = wrote.headers.get('x-svc-lsn')!;
          expect(written).toMatch(LSN);
          const published = () => stream.events.slice(seen).find((e) => e.event === 'record.published');
          await eventually(() => published() !== undefined, 10_000);
          const ev = published();
          expect(ev.data).toMatchObject({ modelKey: 'post', recordId: id, action: 'published' });
          expect(ev.data.lsn).toMatch(LSN);
          // The relay read its position after the commit: never before what the writer reported.
          expect(parseLsn(ev.data.lsn)).toBeGreaterThanOrEqual(parseLsn(written));
          // The draft's update event names its position too.
          expect(stream.events.slice(seen).find((e) => e.event === 'record.updated')?.data.lsn).toMatch(LSN);
          expect(await title(server.apiUrl, ev.data.lsn)).toBe(`v${i}`);
          expect(await title(other!.url, ev.data.lsn)).toBe(`v${i}`);
        }
      } finally {
        await pair.resumeReplay();
      }
    } finally {
      stream.es.close();
    }
  }, 120_000);
});

describe('realtime events without read replicas', () => {
  let server: TestServer | undefined;
  afterAll(() => server?.stop());

  test('content events carry no lsn (nothing changes without DATABASE_READ_URL)', async () => {
    // An empty DATABASE_READ_URL: none, also when the suite runs on a standby (.ci/replicas).
    server = await startTestServer({ DATABASE_READ_URL: '' });
    const p = await gqlProject(server, POST);
    const sk = await p.key('sk', ALL_SECRET);
    const pk = await p.key('pk', ['records:read']);
    const stream = sse(server.gatewayUrl, 'changes:post', { apiKey: pk });
    try {
      await eventually(() => stream.isConnected(), 10_000);
      await p.gql(sk, 'mutation { createPost(data: { title: "a" }) { _id } }');
      await eventually(() => stream.events.length > 0, 10_000);
      expect(stream.events[0].data.modelKey).toBe('post');
      expect(stream.events[0].data).not.toHaveProperty('lsn');
    } finally {
      stream.es.close();
    }
  }, 60_000);
});
