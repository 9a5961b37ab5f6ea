import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { createClient } from 'graphql-ws';
import postgres from 'postgres';
import type { Subprocess } from 'bun';
import { skipStandby, type StandbyPair } from '../support/standby.ts';
import { replicaFixture, POST, type ReplicaFixture } from '../support/replica-fixture.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { formatLsn, parseLsn } from '../../src/store/lsn.ts';
import { readSettings } from '../../src/env.ts';

/**
 * DATABASE_READ_URL against a real hot standby (test/support/standby.ts: our own primary and a
 * `pg_basebackup -R` standby of it, never the shared server). Published reads go to the standby;
 * a read after a write never sees the state before it, even with the standby's replay paused;
 * a replica past SVC_REPLICA_MAX_LAG_MS or killed leaves rotation and no request fails.
 */
const skip = skipStandby();

/** Retries `check` (assertions may throw) until it passes or `ms` pass; then throws its last error. */
async function until(check: () => unknown, ms: number): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > end) throw err;
      await Bun.sleep(50);
    }
  }
}

describe.skipIf(skip)('read replicas (a real hot standby)', () => {
  let pair: StandbyPair;
  let server: TestServer;
  let p: GqlProject;
  let sk: string;
  let pk: string;
  let id: string;
  let other: { proc: Subprocess; url: string } | undefined;
  let primaryDb: string;
  let standbyDb: string;

  const replica = () => server.svc.replicas!.status()[0]!;
  const title = async (key = pk, headers: Record<string, string> = {}, base = server.apiUrl) => {
    const res = await fetch(`${base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
      body: JSON.stringify({ query: 'query($id: ID!) { post(_id: $id) { title } }', variables: { id } }),
    });
    const body = (await res.json()) as any;
    if (res.status !== 200 || body.errors) throw new Error(`read failed: ${res.status} ${JSON.stringify(body)}`);
    return body.data.post?.title as string | undefined;
  };
  /** Updates and publishes the post; returns the x-svc-lsn of the publish's response. */
  const publish = async (t: string) => {
    const u = await p.gql(sk, 'mutation($id: ID!, $t: String!) { updatePost(_id: $id, data: { title: $t }) { _id } }', {
      id,
      t,
    });
    expect(u.body.errors).toBeUndefined();
    const r = await p.gql(sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', { id });
    expect(r.body.errors).toBeUndefined();
    const lsn = r.headers.get('x-svc-lsn');
    expect(lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    return lsn!;
  };

  let fixture: ReplicaFixture | undefined;

  beforeAll(async () => {
    fixture = await replicaFixture('svc_replicas', (standbyDb) => ({
      DATABASE_READ_URL: standbyDb,
      SVC_REPLICA_MAX_LAG_MS: '600',
      SVC_REPLICA_POLL_MS: '50',
      SVC_REPLICA_WAIT_MS: '200',
    }));
    ({ pair, primaryDb, standbyDb, server, other, p, sk, pk, id } = fixture);
  }, 240_000);

  afterAll(() => fixture?.stop(), 60_000);

  test('published reads go to the standby once it has replayed the writes; /health and /metrics show it', async () => {
    await until(() => expect(replica().state).toBe('up'), 20_000);
    const before = replica().reads;
    // A read the standby can answer: it has replayed past everything this process wrote.
    await until(async () => {
      expect(await title()).toBe('v0');
      expect(replica().reads).toBeGreaterThan(before);
    }, 20_000);
    const health = (await (await fetch(`${server.apiUrl}/health`)).json()) as any;
    expect(health.replicas).toHaveLength(1);
    expect(health.replicas[0]).toMatchObject({ name: expect.stringContaining('svc_replicas'), state: 'up' });
    expect(JSON.stringify(health)).not.toContain('postgres@');
    const metrics = await (await fetch(`${server.apiUrl}/metrics`)).text();
    expect(metrics).toMatch(/svc_replica_lag_seconds\{replica="[^"]+"\} [0-9.]+/);
    expect(metrics).toMatch(/svc_replica_state\{replica="[^"]+",state="up"\} 1/);
  }, 60_000);

  test('a publish followed at once by a public read returns the new content, in this process and (with x-svc-lsn) in another', async () => {
    for (let i = 1; i <= 8; i++) {
      const lsn = await publish(`v${i}`);
      expect(await title()).toBe(`v${i}`);
      expect(await title(pk, { 'x-svc-lsn': lsn }, other!.url)).toBe(`v${i}`);
    }
    // With the standby's replay paused it holds the old state for sure: the reads still never see it.
    await pair.pauseReplay();
    try {
      const lsn = await publish('paused');
      expect(await title()).toBe('paused');
      expect(await title(pk, { 'x-svc-lsn': lsn }, other!.url)).toBe('paused');
      // The standby itself still answers the old title: the reads above did not come from it.
      const standby = postgres(standbyDb, { max: 1, onnotice: () => {} });
      const [row] = await standby`select pg_is_wal_replay_paused() as paused`;
      await standby.end();
      expect(row!.paused).toBe(true);
    } finally {
      await pair.resumeReplay();
    }
  }, 120_000);

  test('realtime: a subscriber of another process that hears the change and reads at once (no x-svc-lsn) gets the new content', async () => {
    const events: any[] = [];
    const ws = createClient({
      url: `${other!.url.replace(/^http/, 'ws')}/graphql/ws`,
      connectionParams: { apiKey: pk },
      retryAttempts: 0,
      lazy: false,
      onNonLazyError: () => {},
    });
    const off = ws.subscribe(
      { query: 'subscription { recordChanged(modelKey: "post") { action recordId } }' },
      { next: (v) => events.push(v.data), error: () => {}, complete: () => {} },
    );
    try {
      // Subscribed once an event reaches it (the subscription is set up asynchronously).
      await until(async () => {
        await publish('warm-up');
        expect(events.length).toBeGreaterThan(0);
      }, 30_000);
      await pair.pauseReplay();
      try {
        for (let i = 0; i < 3; i++) {
          const seen = events.length;
          // The update's event (a draft change) comes first; the publish's is the one to read after.
          const heard = new Promise<string | undefined>((resolve) => {
            const t = setInterval(() => {
              if (events.slice(seen).some((e) => e.recordChanged.action === 'published')) {
                clearInterval(t);
                // The event's process reads right away: the standby (paused) still has the old title.
                void title(pk, {}, other!.url).then(resolve, resolve);
              }
            }, 1);
          });
          await publish(`live-${i}`);
          expect(await heard).toBe(`live-${i}`);
        }
      } finally {
        await pair.resumeReplay();
      }
    } finally {
      off();
      await ws.dispose();
    }
  }, 120_000);

  test('a replica paused past SVC_REPLICA_MAX_LAG_MS leaves rotation, reads stay correct, and it comes back once caught up', async () => {
    await until(() => expect(replica().state).toBe('up'), 20_000);
    await pair.pauseReplay();
    try {
      // The primary moves on (a write), the standby does not: its lag grows past the bound.
      await publish('lagging');
      await until(async () => {
        await publish(`lagging`);
        expect(replica().state).toBe('lagging');
      }, 30_000);
      const health = (await (await fetch(`${server.apiUrl}/health`)).json()) as any;
      expect(health.replicas[0].state).toBe('lagging');
      expect(health.replicas[0].lagMs).toBeGreaterThan(600);
      // Out of rotation: published reads come from the primary, and are current.
      const before = replica().reads;
      expect(await title()).toBe('lagging');
      expect(replica().reads).toBe(before);
    } finally {
      await pair.resumeReplay();
    }
    await until(() => expect(replica().state).toBe('up'), 30_000);
  }, 120_000);

  test('a killed replica costs no failed request; reads degrade to the primary and return to it when it is back', async () => {
    await until(() => expect(replica().state).toBe('up'), 20_000);
    // A process that polls once a minute still believes in the replica when it dies: its reads
    // fail there first and are answered by the primary.
    const slow = await startTestServer({
      DATABASE_URL: primaryDb,
      DATABASE_READ_URL: standbyDb,
      SVC_REPLICA_POLL_MS: '60000',
      SVC_REPLICA_MAX_LAG_MS: '600000',
    });
    expect(slow.svc.replicas!.status()[0]!.state).toBe('up');
    await pair.killStandby();
    try {
      for (let i = 0; i < 5; i++) {
        const res = await fetch(
          `${slow.apiUrl}/graphql?query=${encodeURIComponent(`{ posts(first: ${i + 1}) { totalCount } }`)}`,
          { headers: { 'x-api-key': pk } },
        );
        expect(res.status).toBe(200);
        expect(((await res.json()) as any).data.posts.totalCount).toBe(1);
      }
      const seen = slow.svc.replicas!.status()[0]!;
      expect(seen.fallbacks).toBeGreaterThanOrEqual(1);
      expect(seen.state).toBe('down');
    } finally {
      await slow.stop();
    }
    try {
      // Distinct queries (no response cache), in this process and the other one, as the replica dies.
      const reads = Array.from({ length: 20 }, (_, i) =>
        fetch(`${i % 2 ? other!.url : server.apiUrl}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': pk },
          body: JSON.stringify({
            query: `query($id: ID!, $n: Int) { post(_id: $id) { title } posts(first: $n) { totalCount } }`,
            variables: { id, n: i + 1 },
          }),
        }).then(async (r) => ({ status: r.status, body: (await r.json()) as any })),
      );
      for (const r of await Promise.all(reads)) {
        expect(r.status).toBe(200);
        expect(r.body.errors).toBeUndefined();
        expect(r.body.data.posts.totalCount).toBe(1);
      }
      await until(() => expect(replica().state).toBe('down'), 20_000);
      const health = (await (await fetch(`${other!.url}/health`)).json()) as any;
      expect(health.status).toBe('ok');
      expect(await title()).toBeString();
    } finally {
      await pair.startStandby();
    }
    await until(() => expect(replica().state).toBe('up'), 60_000);
    const before = replica().reads;
    await until(async () => {
      const res = await fetch(
        `${server.apiUrl}/graphql?query=${encodeURIComponent(`{ posts(first: ${Math.floor(Math.random() * 50) + 1}) { totalCount } }`)}`,
        { headers: { 'x-api-key': pk } },
      );
      expect(res.status).toBe(200);
      expect(replica().reads).toBeGreaterThan(before);
    }, 30_000);
  }, 180_000);

  test('x-svc-lsn: a malformed header is a 400 BAD_USER_INPUT, never a 500 (fuzzed)', async () => {
    const bad = await p.gql(pk, '{ posts { totalCount } }', undefined, { 'x-svc-lsn': 'not-an-lsn' });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    // An LSN past anything the primary wrote: waits SVC_REPLICA_WAIT_MS, then the primary answers.
    const ahead = await p.gql(pk, '{ posts { totalCount } }', undefined, { 'x-svc-lsn': 'FFFFFFFF/FFFFFFFF' });
    expect(ahead.status).toBe(200);
    expect(ahead.body.data.posts.totalCount).toBe(1);
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 }),
        async (h) => {
          const r = await p.gql(pk, '{ posts { totalCount } }', undefined, {
            'x-svc-lsn': h,
            cookie: `svc_lsn=${encodeURIComponent(h)}`,
          });
          expect([200, 400]).toContain(r.status);
          if (r.status === 400) expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
        },
      ),
      { numRuns: 40 },
    );
  }, 120_000);
});

describe('LSN text', () => {
  test('parseLsn and formatLsn round-trip; anything else (NUL, lone surrogates, huge text) is 0', () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 2 ** 53 - 1 }), (n) => expect(parseLsn(formatLsn(n))).toBe(n)));
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary' }),
          fc.string({ minLength: 10_000, maxLength: 20_000 }),
          fc.constant('\0/1'),
          fc.constant('\ud800/0'),
        ),
        (s) => {
          const n = parseLsn(s);
          expect(Number.isFinite(n) && n >= 0).toBe(true);
          if (!/^\s*[0-9A-Fa-f]{1,8}\/[0-9A-Fa-f]{1,8}\s*$/.test(s)) expect(n).toBe(0);
        },
      ),
      { numRuns: 100 },
    );
    expect(parseLsn('16/B374D848')).toBe(0x16 * 2 ** 32 + 0xb374d848);
  }, 60_000);
});

describe('without DATABASE_READ_URL nothing changes', () => {
  let server: TestServer;
  afterAll(() => server?.stop());

  test('no x-svc-lsn or cookie on writes, an x-svc-lsn sent is ignored, /health has no replicas', async () => {
    // An empty DATABASE_READ_URL: none, also when the suite runs on a standby (.ci/replicas).
    server = await startTestServer({ DATABASE_READ_URL: '' });
    expect(server.svc.replicas).toBeUndefined();
    const p = await gqlProject(server, POST);
    const sk = await p.key('sk', ALL_SECRET);
    const c = await p.gql(sk, 'mutation { createPost(data: { title: "a" }) { _id } }');
    expect(c.body.errors).toBeUndefined();
    expect(c.headers.get('x-svc-lsn')).toBeNull();
    expect(c.headers.get('set-cookie')).toBeNull();
    const r = await p.gql(sk, '{ posts(preview: true) { totalCount } }', undefined, { 'x-svc-lsn': 'not-an-lsn' });
    expect(r.status).toBe(200);
    expect(r.body.data.posts.totalCount).toBe(1);
    const health = (await (await fetch(`${server.apiUrl}/health`)).json()) as any;
    expect(health.replicas).toBeUndefined();
  }, 60_000);

  test('DATABASE_READ_URL and the replica settings are checked at start with one clear line', () => {
    expect(readSettings({}).replicas).toBeUndefined();
    expect(readSettings({ DATABASE_READ_URL: ' postgres://a@h1/db , postgresql://b@h2:5433/db ' }).replicas).toEqual({
      urls: ['postgres://a@h1/db', 'postgresql://b@h2:5433/db'],
      maxLagMs: 5000,
      pollMs: 100,
      waitMs: 250,
    });
    expect(() => readSettings({ DATABASE_READ_URL: 'mysql://x/y' })).toThrow(
      'DATABASE_READ_URL must be comma-separated postgres:// URLs',
    );
    expect(() => readSettings({ DATABASE_READ_URL: 'postgres://secret:pw@h/db,not a url' })).toThrow(
      /^DATABASE_READ_URL must be/,
    );
    expect(() => readSettings({ DATABASE_READ_URL: 'postgres://h/db', SVC_REPLICA_MAX_LAG_MS: '-1' })).toThrow(
      'SVC_REPLICA_MAX_LAG_MS',
    );
    expect(() => readSettings({ DATABASE_READ_URL: 'postgres://h/db', SVC_REPLICA_WAIT_MS: 'x' })).toThrow(
      'SVC_REPLICA_WAIT_MS',
    );
  });
});
