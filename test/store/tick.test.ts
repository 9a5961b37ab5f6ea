import { afterAll, expect, test } from 'bun:test';
import { ScheduledActionWorker } from '../../src/editorial/schedule-worker.ts';
import { DeadlineExceeded, withDeadline } from '../../src/store/tick.ts';
import { eventually } from '../support/eventually.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let server: TestServer | undefined;
afterAll(async () => {
  await server?.stop();
}, 60_000);

test('withDeadline answers the work, or DeadlineExceeded once the deadline passed', async () => {
  expect(await withDeadline(Promise.resolve(7), 1000, 'quick')).toBe(7);
  await expect(withDeadline(Promise.reject(new Error('no')), 1000, 'failing')).rejects.toThrow('no');
  const err = (await withDeadline(new Promise(() => {}), 50, 'the tick').catch((e: unknown) => e)) as Error;
  expect(err).toBeInstanceOf(DeadlineExceeded);
  expect(err.message).toBe('the tick still running after 50 ms; the loop goes on');
  // A late rejection after the deadline is nobody's unhandled rejection.
  const late = new Promise((_, reject) => setTimeout(() => reject(new Error('late')), 80));
  await expect(withDeadline(late, 20, 'late')).rejects.toBeInstanceOf(DeadlineExceeded);
  await Bun.sleep(100);
});

test('a scheduled-actions tick whose work never settles is counted failed and the loop goes on', async () => {
  server = await startTestServer();
  const svc = server.svc;
  const worker = new ScheduledActionWorker(
    { sql: svc.sql, writes: svc.writes, project: async (id) => (await svc.projects.get(id)).snapshot },
    { tickMs: 20, purgeEveryMs: 3600_000, deadlineMs: 100 },
  );
  let hung = 0;
  let after = 0;
  worker.also('hung', () => {
    hung++;
    return new Promise(() => {});
  });
  worker.also('after', async () => {
    after++;
  });
  worker.start();
  try {
    // Before the deadline, one never-settling `also` stopped the worker after its first tick.
    await eventually(() => hung >= 4 && after >= 4, 10_000);
    expect(worker.ticks).toBeGreaterThanOrEqual(4);
    expect(worker.log.failures).toBe(0);
  } finally {
    await worker.stop();
  }
}, 60_000);
