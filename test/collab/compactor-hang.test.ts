import { describe, expect, test } from 'bun:test';
import { Compactor } from '../../src/collab/compactor.ts';
import { startTestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { freshDatabase } from '../support/db.ts';
import { MODELS, editor, roomOf, storedDoc, synced } from './support.ts';

/**
 * A compactor worker that hangs (it takes the job and never answers): every request times out,
 * the worker is replaced, the room backs off, and shutdown does not wait for it beyond its grace.
 * Compaction is never needed for durability: what editors typed is all in the log.
 */
const hanging = new URL('./fixtures/hanging-compactor.ts', import.meta.url);

describe('a hanging compactor worker', () => {
  test('each request times out and is skipped; the next one starts a new worker; close() is bounded', async () => {
    const c = new Compactor({ url: 'postgres://unused', workerUrl: hanging, timeoutMs: 200, retryMs: 100 });
    const t0 = Date.now();
    expect(await c.compact('room-a')).toBeNull();
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(c.stats).toMatchObject({ failures: 1, workers: 1 });
    // Backing off: no new worker for the same room yet; another room gets one.
    expect(await c.compact('room-a')).toBeNull();
    expect(c.stats.workers).toBe(1);
    expect(await c.compact('room-b')).toBeNull();
    expect(c.stats).toMatchObject({ failures: 2, workers: 2 });
    // A request in flight at close: closed within the grace, the request skipped.
    const slow = new Compactor({ url: 'postgres://unused', workerUrl: hanging, timeoutMs: 60_000 });
    const pending = slow.compact('room-c');
    const t1 = Date.now();
    await slow.close(300);
    expect(await pending).toBeNull();
    expect(Date.now() - t1).toBeLessThan(3_000);
    expect(await slow.compact('room-c')).toBeNull();
  }, 20_000);

  test('a service whose compactions hang: editors type on, shutdown completes promptly, nothing is lost', async () => {
    const url = await freshDatabase('hang');
    const collab = { debounceMs: 20, maxWaitMs: 100, compactRows: 2, compactBytes: 1024, compactorWorker: hanging };
    const server = await startTestServer({ DATABASE_URL: url }, { ...collab, compactTimeoutMs: 60_000 });
    const p = await gqlProject(server, MODELS, 'collab-hang');
    const key = await p.key('sk', ALL_SECRET);
    const id = (await p.gql(key, 'mutation { createArticle(data: { title: "Hang" }) { _id } }')).body.data.createArticle
      ._id as string;
    const room = roomOf('article', id);
    const roomKey = `${p.projectId}/${room}`;
    const x = editor(server.gatewayUrl, room, { apiKey: key });
    await synced(x);
    for (let i = 0; i < 30; i++) {
      x.text('title').insert(x.text('title').length, ` ${i}`);
      await Bun.sleep(25);
    }
    const typed = x.text('title').toString();
    // Saves went on while a compaction hangs in the worker.
    const compactor = server.svc.collab.compactor!;
    await eventually(() => compactor.busy(roomKey), 5_000);
    await eventually(async () => {
      const doc = await storedDoc(server.svc.sql, roomKey);
      return (doc?.getMap('content').get('title') as { toString(): string } | undefined)?.toString() === typed;
    }, 10_000);
    x.close();
    const t0 = Date.now();
    await server.stop();
    // The rooms' final saves, then at most the compactor's grace (2 s) for the stuck merge.
    expect(Date.now() - t0).toBeLessThan(10_000);
    // A new process on the same database: the room loads from state + log, with every edit.
    const next = await startTestServer({ DATABASE_URL: url });
    try {
      const y = editor(next.gatewayUrl, room, { apiKey: key });
      await synced(y);
      expect(y.text('title').toString()).toBe(typed);
      y.close();
    } finally {
      await next.stop();
    }
  }, 60_000);
});
