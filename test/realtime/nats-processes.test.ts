import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from 'graphql-ws';
import { join } from 'node:path';
import { startTestServer, cli, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { startNats, type TestNats } from '../support/nats.ts';
import { spawnService } from '../support/process.ts';
import { eventsSocket, sse } from './support.ts';
import { tokenService } from '../../src/identity/tokens.ts';
import { createSession } from '../../src/identity/customer-sessions.ts';
import { newId } from '../../src/ids.ts';
import { editor, roomOf, synced } from '../collab/support.ts';

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
/** A second gateway process, for a room shared across gateways. */
let gateway2: string;
const procs: ReturnType<typeof Bun.spawn>[] = [];

async function spawn(role: string, busUrl: string) {
  const { proc, url } = await spawnService(
    {
      DATABASE_URL: worker.databaseUrl,
      SVC_ROOT_TOKEN: worker.rootToken,
      SVC_DATA_DIR: worker.dataDir,
      SVC_READ_POOL: '1',
      SVC_BUS_URL: busUrl,
      SVC_LOG: 'off',
    },
    { role, cwd: ROOT },
  );
  procs.push(proc);
  return url;
}

beforeAll(async () => {
  nats = await startNats();
  const busUrl = `${nats.url}/procs`;
  worker = await startTestServer({ SVC_ROLE: 'worker', SVC_BUS_URL: busUrl });
  [writer, gateway, gateway2] = await Promise.all([
    spawn('api', busUrl),
    spawn('gateway', busUrl),
    spawn('gateway', busUrl),
  ]);
  p = await gqlProject(
    { ...worker, apiUrl: writer },
    [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }],
    'nats-procs',
  );
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

  test("every channel: changes, jobs and notifications from the API and worker processes reach the gateway and the API's graphql-ws, in order", async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const sender = await p.key('sk', ['notifications:write']);
    const reader = await p.key('sk', ['records:read', 'operations:read', 'notifications:read']);
    const cid = newId('cus');
    await worker.svc
      .sql`insert into customers (id, project_id, email) values (${cid}, ${p.projectId}, ${`${cid}@example.com`})`;
    const me = await createSession(worker.svc.sql, tokenService(worker.svc), {
      projectId: p.projectId,
      customerId: cid,
      email: `${cid}@example.com`,
      scopes: ['records:read'],
      roles: [],
    });
    const exe = newId('exe');
    await worker.svc
      .sql`insert into operation_executions (id, project_id, operation_key, url, status) values (${exe}, ${p.projectId}, 'op', 'http://127.0.0.1:9/op', 'completed')`;
    const job = (status: 'running' | 'completed', pct: number | null) =>
      worker.svc.bus.publish({
        type: 'execution.changed',
        projectId: p.projectId,
        executionId: exe,
        operationKey: 'op',
        status,
        progressPct: pct,
        progressMessage: null,
        resultJson: null,
        errorJson: null,
      });
    const streams = {
      all: sse(gateway, 'changes:*', { apiKey: reader }),
      jobs: sse(gateway, `jobs:${exe}`, { apiKey: reader }),
      mine: sse(gateway, `notifications:${cid}`, { apiKey: reader, token: me.accessToken }),
    };
    const socket = await eventsSocket(gateway, { apiKey: reader, token: me.accessToken });
    for (const channel of ['changes:post', 'jobs:*', `notifications:${cid}`])
      socket.send({ type: 'subscribe', channel });
    const viaGql: any[] = [];
    const ws = createClient({
      url: `${writer.replace(/^http/, 'ws')}/graphql/ws`,
      connectionParams: { apiKey: reader },
      retryAttempts: 0,
    });
    ws.subscribe(
      { query: 'subscription { recordChanged(modelKey: "post") { action recordId } }' },
      { next: (v) => viaGql.push(v.data), error: () => {}, complete: () => {} },
    );
    ws.subscribe(
      { query: `subscription { operationExecution(id: "${exe}") { status } }` },
      { next: (v) => viaGql.push(v.data), error: () => {}, complete: () => {} },
    );
    try {
      await eventually(
        () =>
          Object.values(streams).every((x) => x.isConnected()) &&
          socket.frames.filter((f) => f.type === 'subscribed').length === 3,
        10_000,
      );
      // Consumers are live once probes on each channel arrive (a gateway subscribes per project).
      const probeEnd = Date.now() + 20_000;
      while (
        !(
          streams.all.events.length &&
          streams.jobs.events.length &&
          streams.mine.events.length &&
          viaGql.some((d) => d.recordChanged) &&
          viaGql.some((d) => d.operationExecution)
        )
      ) {
        if (Date.now() > probeEnd) throw new Error('a channel never heard its probe');
        await p.gql(sk, 'mutation { createPost(data: { title: "probe" }) { _id } }');
        await job('running', 0);
        await p.gql(
          sender,
          'mutation($c: ID!) { sendNotification(customerId: $c, type: "probe", title: "p") { id } }',
          { c: cid },
        );
        await Bun.sleep(300);
      }
      const id = (await p.gql(sk, 'mutation { createPost(data: { title: "x" }) { _id } }')).body.data.createPost._id;
      await p.gql(sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', { id });
      await job('running', 50);
      await p.gql(
        sender,
        'mutation($c: ID!) { sendNotification(customerId: $c, type: "order.shipped", title: "Shipped") { id } }',
        { c: cid },
      );
      await p.gql(sk, 'mutation($id: ID!) { deletePost(_id: $id) }', { id });
      await job('completed', null);
      const ofRecord = (events: any[]) => events.filter((e) => e.data?.recordId === id).map((e) => e.event);
      // Probes report progress 0: leaving them out, a late probe cannot count.
      const jobsAfter = (events: any[]) =>
        events
          .filter((e) => e.event?.startsWith('job.') && e.data.progressPct !== 0)
          .map((e) => `${e.event}:${e.data.progressPct}`);
      const shipped = (events: any[]) => events.filter((e) => e.event === 'notification.order.shipped').length;
      await eventually(
        () =>
          ofRecord(streams.all.events).length === 3 &&
          jobsAfter(streams.jobs.events).length === 2 &&
          shipped(streams.mine.events) === 1 &&
          ofRecord(socket.frames).length === 3 &&
          jobsAfter(socket.frames).length === 2 &&
          shipped(socket.frames) === 1 &&
          viaGql.filter((d) => d.recordChanged?.recordId === id).length === 3 &&
          viaGql.some((d) => d.operationExecution?.status === 'completed'),
        20_000,
      );
      await Bun.sleep(300);
      expect(ofRecord(streams.all.events)).toEqual(['record.created', 'record.published', 'record.deleted']);
      expect(ofRecord(socket.frames)).toEqual(['record.created', 'record.published', 'record.deleted']);
      expect(jobsAfter(streams.jobs.events)).toEqual(['job.running:50', 'job.completed:null']);
      expect(jobsAfter(socket.frames)).toEqual(['job.running:50', 'job.completed:null']);
      expect([shipped(streams.mine.events), shipped(socket.frames)]).toEqual([1, 1]);
      expect(viaGql.filter((d) => d.recordChanged?.recordId === id).map((d) => d.recordChanged.action)).toEqual([
        'created',
        'published',
        'deleted',
      ]);
    } finally {
      for (const x of Object.values(streams)) x.es.close();
      socket.ws.close();
      await ws.dispose();
    }
  }, 90_000);

  test('a room shared by editors on two gateway processes: edits and presence converge over NATS, also across a NATS restart; a third process saves both', async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const id = (await p.gql(sk, 'mutation { createPost(data: { title: "Shared" }) { _id } }')).body.data.createPost._id;
    const x = editor(gateway, roomOf('post', id), { apiKey: sk });
    const y = editor(gateway2, roomOf('post', id), { apiKey: sk });
    try {
      await synced(x, y);
      await eventually(
        () => x.text('title')?.toString() === 'Shared' && y.text('title')?.toString() === 'Shared',
        10_000,
      );
      x.text('title').insert(6, ' by x');
      y.text('title').insert(0, 'Y: ');
      await eventually(
        () => x.text('title').toString() === 'Y: Shared by x' && y.text('title').toString() === 'Y: Shared by x',
        15_000,
      );
      y.provider.awareness.setLocalStateField('user', { name: 'Yves' });
      await eventually(
        () => [...x.provider.awareness.getStates().values()].some((st) => st.user?.name === 'Yves'),
        10_000,
      );
      // The gateways talked over the room's NATS subject: no relay rows in PostgreSQL.
      const [rows] = await worker.svc
        .sql`select count(*)::int as n from collab_updates where room like ${`%/${roomOf('post', id)}`}`;
      expect(rows!.n).toBe(0);
      const title = async () =>
        (await p.gql(sk, 'query($id: ID!) { post(_id: $id, preview: true) { content } }', { id })).body.data.post
          .content.title;
      // Post is versioned: the draft is saved on request, here through the API process (a third
      // process, which holds no editor of the room), and holds both gateways' edits.
      const saved = await p.gql(sk, 'mutation($r: String!) { saveCollabDraft(roomName: $r) { _id } }', {
        r: roomOf('post', id),
      });
      expect(saved.body.errors).toBeUndefined();
      expect(await title()).toBe('Y: Shared by x');
      const [versions] = await worker.svc.sql`select count(*)::int as n from record_versions where record_id = ${id}`;
      expect(versions!.n).toBe(2);
      // NATS away while both type: room traffic sent meanwhile is lost, and when NATS is back
      // the processes exchange full states, so both editors converge on both edits.
      await nats.kill();
      x.text('title').insert(0, '[x] ');
      y.text('title').insert(y.text('title').length, ' [y]');
      await nats.restart();
      const both = '[x] Y: Shared by x [y]';
      await eventually(() => x.text('title').toString() === both && y.text('title').toString() === both, 30_000);
    } finally {
      x.close();
      y.close();
    }
  }, 60_000);

  test('an SSE client resumes on another gateway with Last-Event-ID: what it missed comes from the stream, once, in order', async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const reader = await p.key('pk', ['records:read']);
    const write = async (title: string) =>
      (await p.gql(sk, 'mutation($t: String!) { createPost(data: { title: $t }) { _id } }', { t: title })).body.data
        .createPost._id as string;
    const first = sse(gateway, 'changes:post', { apiKey: reader });
    const seen: string[] = [];
    try {
      await eventually(() => first.isConnected(), 10_000);
      const probeEnd = Date.now() + 15_000;
      while (first.events.length === 0) {
        if (Date.now() > probeEnd) throw new Error('the gateway never heard a write');
        await write('probe');
        await Bun.sleep(300);
      }
      for (let i = 0; i < 3; i++) seen.push(await write(`seen ${i}`));
      await eventually(() => seen.every((id) => first.events.some((e) => e.data.recordId === id)), 10_000);
    } finally {
      first.es.close();
    }
    const lastId = first.ids[first.events.findIndex((e) => e.data.recordId === seen.at(-1))]!;
    // Ids name the event's place in the stream, the same on every gateway.
    expect(lastId).toMatch(/^n\.\d+\.\d+$/);
    const missed: string[] = [];
    for (let i = 0; i < 4; i++) missed.push(await write(`missed ${i}`));
    // The other gateway never served this channel: nothing of it in its memory.
    const resumed = sse(gateway2, 'changes:post', { apiKey: reader }, { 'last-event-id': lastId });
    try {
      await eventually(() => missed.every((id) => resumed.events.some((e) => e.data.recordId === id)), 15_000);
      const after = [await write('after 0'), await write('after 1')];
      await eventually(() => after.every((id) => resumed.events.some((e) => e.data.recordId === id)), 15_000);
      await Bun.sleep(300);
      const got = resumed.events.map((e) => e.data.recordId).filter((id) => id !== undefined);
      expect(got.filter((id) => [...seen, ...missed, ...after].includes(id))).toEqual([...missed, ...after]);
      expect(new Set(resumed.ids).size).toBe(resumed.ids.length);
    } finally {
      resumed.es.close();
    }
  }, 90_000);

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
      const onSocket = socket.frames
        .filter((f) => f.channel === 'changes:post' && f.data)
        .map((f) => f.data.recordId)
        .filter((id: string) => titles.includes(id));
      expect(onSocket).toEqual(titles);
      expect([stream.bus[0], stream.bus.at(-1)]).toEqual([false, true]);
    } finally {
      await ws.dispose();
      socket.ws.close();
      stream.es.close();
    }
  }, 90_000);
});
