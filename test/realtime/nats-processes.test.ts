import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from 'graphql-ws';
import { join } from 'node:path';
import { startTestServer, cli, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { startNats, type TestNats } from '../support/nats.ts';
import { spawnService } from '../support/process.ts';
import { eventsSocket, sse } from './support.ts';

/**
 * SVC_BUS_URL=nats://…: three processes (a worker in-process, an API process writing and a
 * gateway process holding subscribers) behave as one service over NATS JetStream, and a
 * subscriber that stays connected while NATS is killed and brought back gets every write once,
 * in order.
 */
const ROOT = join(import.meta.dir, '..', '..');
let nats: TestNats;
let worker: TestServer;
let p: GqlProject;
let writer: string;
let gateway: string;
const procs: ReturnType<typeof Bun.spawn>[] = [];

async function spawn(role: string, busUrl: string) {
  const { proc, url } = await spawnService({ DATABASE_URL: worker.databaseUrl, SVC_ROOT_TOKEN: worker.rootToken, SVC_DATA_DIR: worker.dataDir, SVC_READ_POOL: '1', SVC_BUS_URL: busUrl, SVC_LOG: 'off' }, { role, cwd: ROOT });
  procs.push(proc);
  return url;
}

beforeAll(async () => {
  nats = await startNats();
  const busUrl = `${nats.url}/procs`;
  worker = await startTestServer({ SVC_ROLE: 'worker', SVC_BUS_URL: busUrl });
  [writer, gateway] = await Promise.all([spawn('api', busUrl), spawn('gateway', busUrl)]);
  p = await gqlProject({ ...worker, apiUrl: writer }, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }], 'nats-procs');
}, 60_000);

afterAll(async () => {
  for (const proc of procs) proc.kill('SIGTERM');
  await Promise.all(procs.map((x) => x.exited));
  await worker.stop();
  await nats.stop();
});

describe('the event bus on NATS across processes', () => {
  test('svc bus status and /health say nats, connected, nothing waiting', async () => {
    // Set-up writes may still be on their way through the outbox: wait until it is empty.
    let status = await cli({ apiUrl: writer }, undefined, 'bus', 'status', '--json');
    const end = Date.now() + 15_000;
    while (!(status.json?.connected && status.json?.backlog === 0) && Date.now() < end) {
      await Bun.sleep(200);
      status = await cli({ apiUrl: writer }, undefined, 'bus', 'status', '--json');
    }
    expect(status.code).toBe(0);
    expect(status.json).toMatchObject({ kind: 'nats', connected: true, backlog: 0 });
    const health = await (await fetch(`${writer}/health`)).json();
    expect(health).toMatchObject({ status: 'ok', bus: { kind: 'nats' } });
  });

  test('writes through one process reach SSE subscribers of another; NATS killed and back loses and repeats nothing', async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const reader = await p.key('pk', ['records:read']);
    const stream = sse(gateway, 'changes:post', { apiKey: reader });
    const socket = await eventsSocket(gateway, { apiKey: reader });
    socket.send({ type: 'subscribe', channel: 'changes:post' });
    // A graphql-ws client on the API process: told through pings with a payload (its protocol's only way).
    const pings: unknown[] = [];
    let acked = false;
    const ws = createClient({
      url: `${writer.replace(/^http/, 'ws')}/graphql/ws`,
      connectionParams: { apiKey: reader },
      retryAttempts: 0,
      lazy: false,
      on: { connected: () => (acked = true), ping: (_received, payload) => void (payload && pings.push(payload)) },
      onNonLazyError: () => {},
    });
    const titles: string[] = [];
    const write = async (title: string) => {
      const res = await p.gql(sk, `mutation($t: String!) { createPost(data: { title: $t }) { _id } }`, { t: title });
      expect(res.body.errors).toBeUndefined();
      titles.push(res.body.data.createPost._id);
    };
    try {
      await eventually(() => stream.isConnected(), 10_000);
      await eventually(() => socket.frames.some((f) => f.type === 'subscribed'), 10_000);
      await eventually(() => acked, 10_000);
      // The gateway's consumer is live once a probe arrives.
      const probeEnd = Date.now() + 15_000;
      while (stream.events.length === 0) {
        if (Date.now() > probeEnd) throw new Error('the gateway never heard a write');
        await p.gql(sk, `mutation { createPost(data: { title: "probe" }) { _id } }`);
        await Bun.sleep(300);
      }
      await eventually(() => stream.events.length > 0, 5_000);
      const skip = new Set(stream.events.map((e) => e.data.recordId));
      const mine = () => stream.events.map((e) => e.data.recordId).filter((id) => !skip.has(id) && titles.includes(id));
      for (let i = 0; i < 10; i++) await write(`before ${i}`);
      await eventually(() => mine().length === 10, 10_000);
      await nats.kill();
      // Clients are told, not left in silence: an SSE `bus` event and a `/_events` frame.
      await eventually(() => stream.bus.includes(false), 15_000);
      await eventually(() => socket.frames.some((f) => f.type === 'bus' && f.connected === false), 15_000);
      await eventually(() => pings.some((x: any) => x.bus === 'disconnected'), 15_000);
      expect(stream.isConnected()).toBe(true);
      for (let i = 0; i < 10; i++) await write(`during ${i}`); // writes still commit
      const down = await cli({ apiUrl: writer }, undefined, 'bus', 'status', '--json');
      expect(down.json.connected).toBe(false);
      expect(down.json.backlog).toBeGreaterThan(0);
      await nats.restart();
      await eventually(() => stream.bus.at(-1) === true, 30_000);
      await eventually(() => socket.frames.findLast((f) => f.type === 'bus')?.connected === true, 30_000);
      await eventually(() => (pings.at(-1) as any)?.bus === 'connected', 30_000);
      for (let i = 0; i < 10; i++) await write(`after ${i}`);
      await eventually(() => mine().length >= 30, 30_000);
      await Bun.sleep(500);
      expect(mine()).toEqual(titles);
      expect(stream.isConnected()).toBe(true);
      // The socket stayed subscribed through the outage and got every write too, in order.
      const onSocket = socket.frames.filter((f) => f.channel === 'changes:post' && f.data).map((f) => f.data.recordId).filter((id: string) => titles.includes(id));
      expect(onSocket).toEqual(titles);
      expect([stream.bus[0], stream.bus.at(-1)]).toEqual([false, true]);
    } finally {
      await ws.dispose();
      socket.ws.close();
      stream.es.close();
    }
  }, 90_000);
});
