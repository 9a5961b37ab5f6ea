import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { RateLimiter } from '../../src/auth/rate-limit.ts';
import { createKey, setup, whoami, type Setup } from './support.ts';

let a: TestServer;
let b: TestServer;
let s: Setup;
beforeAll(async () => {
  a = await startTestServer();
  // A second process's worth of service on the same database: its own key cache, its own counts.
  b = await startTestServer({ DATABASE_URL: a.databaseUrl });
  s = await setup(a);
});
afterAll(async () => {
  await b.stop();
  await a.stop();
});

const pub = (...extra: string[]) => [
  '--type',
  'public',
  '--scopes',
  'records:read',
  '--project',
  s.projectId,
  ...extra,
];

describe('Limits: rate limit', () => {
  test('default: 10,000 requests per hour per key, with the three headers on every response', async () => {
    const k = await createKey(a, s.ownerKey, ...pub());
    const first = await whoami(a, { 'x-api-key': k.key });
    const second = await whoami(a, { 'x-api-key': k.key });
    expect(first.headers.get('x-ratelimit-limit')).toBe('10000');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('9999');
    expect(second.headers.get('x-ratelimit-remaining')).toBe('9998');
    const reset = Number(first.headers.get('x-ratelimit-reset'));
    const now = Date.now() / 1000;
    expect(reset).toBeGreaterThan(now);
    expect(reset).toBeLessThanOrEqual(now + 3600);
    expect(reset % 3600).toBe(0);
  });

  test('over the limit: HTTP 429 with Retry-After and RATE_LIMITED; refused requests are not counted', async () => {
    const k = await createKey(a, s.ownerKey, ...pub('--rate-limit', '3'));
    for (let i = 2; i >= 0; i--) {
      const r = await whoami(a, { 'x-api-key': k.key });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-limit')).toBe('3');
      expect(r.headers.get('x-ratelimit-remaining')).toBe(String(i));
    }
    const over = await whoami(a, { 'x-api-key': k.key });
    expect(over.status).toBe(429);
    expect(over.body.error).toBe('RATE_LIMITED');
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(3600);
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(over.headers.get('x-ratelimit-reset')).toBe(String(Math.floor(Date.now() / 1000 / 3600) * 3600 + 3600));
    await a.svc.sql`select 1`;
    await Bun.sleep(400);
    const [row] = await a.svc.sql`select count from api_key_usage where key_id = ${k.id}`;
    expect(Number(row!.count)).toBe(3);
  });

  test('each operation of a batched request counts', async () => {
    const limiter = new RateLimiter(a.svc.sql, { flushMs: 50 });
    const d1 = await limiter.take({ keyId: 'key_batch_test' }, 4, 10);
    expect(d1).toMatchObject({ allowed: true, remaining: 6, limit: 10 });
    const d2 = await limiter.take({ keyId: 'key_batch_test' }, 7, 10);
    expect(d2).toMatchObject({ allowed: false, remaining: 6 });
    await limiter.stop();
  });

  test('across two processes on one PostgreSQL the count is shared', async () => {
    const k = await createKey(a, s.ownerKey, ...pub('--rate-limit', '5'));
    for (let i = 0; i < 3; i++) expect((await whoami(a, { 'x-api-key': k.key })).status).toBe(200);
    await Bun.sleep(400);
    const onB = await whoami(b, { 'x-api-key': k.key });
    expect(onB.status).toBe(200);
    expect(onB.headers.get('x-ratelimit-remaining')).toBe('1');
    expect((await whoami(b, { 'x-api-key': k.key })).headers.get('x-ratelimit-remaining')).toBe('0');
    expect((await whoami(b, { 'x-api-key': k.key })).status).toBe(429);
    // Process A learns of B's traffic from the batched refresh, within about a second.
    await Bun.sleep(1500);
    const backOnA = await whoami(a, { 'x-api-key': k.key });
    expect(backOnA.status).toBe(429);
    expect(backOnA.headers.get('retry-after')).not.toBeNull();
  });
});

describe('Key lifecycle across processes', () => {
  test('a disabled key stops working within one second on every process', async () => {
    const k = await createKey(a, s.ownerKey, ...pub());
    expect((await whoami(a, { 'x-api-key': k.key })).status).toBe(200);
    expect((await whoami(b, { 'x-api-key': k.key })).status).toBe(200);
    // Both processes now serve the key from memory.
    const t0 = Date.now();
    expect((await cli(a, s.ownerKey, 'api-keys', 'disable', k.id)).code).toBe(0);
    let seenAt = -1;
    while (Date.now() - t0 < 1000) {
      const [ra, rb] = await Promise.all([whoami(a, { 'x-api-key': k.key }), whoami(b, { 'x-api-key': k.key })]);
      if (ra.status === 401 && rb.status === 401) {
        seenAt = Date.now() - t0;
        break;
      }
      await Bun.sleep(20);
    }
    expect(seenAt).toBeGreaterThanOrEqual(0);
    expect(seenAt).toBeLessThan(1000);
  });

  test('a key created on one process works at once on another', async () => {
    const k = await createKey(a, s.ownerKey, ...pub());
    expect((await whoami(b, { 'x-api-key': k.key })).status).toBe(200);
  });

  test('a key change made on one process reaches the other (domain restriction)', async () => {
    const k = await createKey(a, s.ownerKey, ...pub());
    expect((await whoami(b, { 'x-api-key': k.key, origin: 'https://evil.example' })).status).toBe(200);
    const res = await fetch(`${a.apiUrl}/v1/control/api-keys/${k.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${s.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ origins: ['https://shop.example'] }),
    });
    expect(res.status).toBe(200);
    await Bun.sleep(300);
    expect((await whoami(b, { 'x-api-key': k.key, origin: 'https://evil.example' })).status).toBe(403);
    expect((await whoami(b, { 'x-api-key': k.key, origin: 'https://shop.example' })).status).toBe(200);
  });
});

describe('Key cache safety net', () => {
  test('with the notification lost, a disabled key is still refused once the TTL revalidation has run', async () => {
    const { KeyResolver } = await import('../../src/auth/resolve.ts');
    const { EventBus } = await import('../../src/bus/bus.ts');
    const k = await createKey(a, s.ownerKey, ...pub());
    // A process-local bus that never hears about the change (the default TTL is a minute; a
    // short one here so the test sees the background revalidation happen).
    const resolver = new KeyResolver(a.svc.sql, new EventBus(), { ttlMs: 300 });
    expect((await resolver.lookup(k.key)).row?.disabled_at).toBeNull();
    await a.svc.sql`update api_keys set disabled_at = now() where id = ${k.id}`;
    const t0 = Date.now();
    let disabledAfter = -1;
    while (Date.now() - t0 < 2000) {
      // Never blocks: past the TTL the stale entry is served while one reload runs.
      const t = Date.now();
      const entry = await resolver.lookup(k.key);
      expect(Date.now() - t).toBeLessThan(100);
      if (entry.row?.disabled_at) {
        disabledAfter = Date.now() - t0;
        break;
      }
      await Bun.sleep(25);
    }
    resolver.close();
    expect(disabledAfter).toBeGreaterThanOrEqual(0);
    expect(disabledAfter).toBeLessThan(1000);
  });

  test('a reconnect of the bus connection flushes the key cache (notifications sent meanwhile are lost)', async () => {
    const k = await createKey(a, s.ownerKey, ...pub());
    expect((await whoami(a, { 'x-api-key': k.key })).status).toBe(200);
    expect((await whoami(b, { 'x-api-key': k.key })).status).toBe(200);
    // Both processes serve the key from memory; the listener connections go away.
    const reconnected = [a, b].map((srv) => new Promise<void>((resolve) => srv.svc.bus.onReconnect(resolve)));
    await a.svc
      .sql`select pg_terminate_backend(pid) from pg_stat_activity where query ilike 'listen%' and pid <> pg_backend_pid()`;
    // Disabled behind the service's back: no key.changed is ever published.
    await a.svc.sql`update api_keys set disabled_at = now() where id = ${k.id}`;
    await Promise.race([
      Promise.all(reconnected),
      Bun.sleep(5000).then(() => Promise.reject(new Error('no reconnect within 5 s'))),
    ]);
    expect((await whoami(a, { 'x-api-key': k.key })).status).toBe(401);
    expect((await whoami(b, { 'x-api-key': k.key })).status).toBe(401);
    // And the bus works again after the reconnect: a change made on A reaches B.
    const k2 = await createKey(a, s.ownerKey, ...pub());
    expect((await whoami(b, { 'x-api-key': k2.key })).status).toBe(200);
    expect((await cli(a, s.ownerKey, 'api-keys', 'disable', k2.id)).code).toBe(0);
    await Bun.sleep(300);
    expect((await whoami(b, { 'x-api-key': k2.key })).status).toBe(401);
  });
});
