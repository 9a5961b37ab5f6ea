import { afterAll, expect, test } from 'bun:test';
import { heapStats } from 'bun:jsc';
import postgres from 'postgres';
import { serverUrl } from '../support/db.ts';
import { eventually } from '../support/eventually.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

/**
 * A running process whose database goes away (here: dropped) must not grow: every loop that
 * retries against it (bus LISTEN, collab relay LISTEN, scheduler, scheduled actions, dispatcher)
 * keeps its pending work bounded. The leak this guards against: postgres.js, listening on two
 * channels through one pool, left one never-settling LISTEN (an async function, a Promise.all and
 * their closures) queued per failed reconnect — hundreds a second, 23 GB after 1 h 45 m.
 */
let server: TestServer | undefined;
afterAll(async () => {
  await server?.stop().catch(() => {});
});

/** Live objects after a full collection, of the kinds a pending async chain is made of. */
function pending(): number {
  Bun.gc(true);
  const t = heapStats().objectTypeCounts as Record<string, number>;
  return (t.AsyncFunctionGenerator ?? 0) + (t.PromiseCombinatorsGlobalContext ?? 0);
}

test('after the database is dropped, the retry loops leave the heap flat and log once', async () => {
  server = await startTestServer();
  const worker = server.svc.scheduledActions!;
  const name = new URL(server.databaseUrl).pathname.slice(1);
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`drop database "${name}" with (force)`);
  } finally {
    await admin.end();
  }
  // Counted in ticks of the scheduled-actions loop (one per 250 ms), not in elapsed time.
  await eventually(() => worker.log.failures >= 8, 60_000);
  const before = pending();
  const from = worker.log.failures;
  await eventually(() => worker.log.failures >= from + 20, 60_000);
  const after = pending();
  // Before the fix this grew by ~80 per tick; a bounded process varies by a handful.
  expect(after - before).toBeLessThan(100);
  // Twenty-eight failing ticks, one line.
  expect(worker.log.lines).toBe(1);
  expect(server.svc.operations.scheduler?.log.lines ?? 1).toBeLessThanOrEqual(1);
}, 180_000);
