import { afterAll, expect, test } from 'bun:test';
import { heapStats } from 'bun:jsc';
import postgres from 'postgres';
import type { ScheduledActionWorker } from '../../src/editorial/schedule-worker.ts';
import { freshDatabase, serverUrl } from '../support/db.ts';
import { eventually } from '../support/eventually.ts';
import { startPgProxy, type PgProxy } from '../support/pg-proxy.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject } from '../graphql/helpers.ts';
import { MODELS } from '../collab/support.ts';

/**
 * A running process whose database goes away must keep its retry loops going and must not grow:
 * every loop that retries against it (bus LISTEN, collab relay LISTEN, scheduler, scheduled
 * actions, dispatcher) keeps its pending work bounded, and picks up again once it is back.
 *
 * The incidents land at the moment that stopped loops for good: the service reaches PostgreSQL
 * through a proxy (support/pg-proxy.ts) that holds back the array-type query postgres.js ran on
 * every new connection, so the connection a tick opened after its old one was terminated sits in
 * that phase when the database goes. postgres.js 3.4.9 then never settled the tick's query
 * (store/db.ts typesOnce): the worker's ticks stopped. Before the fix both tests failed on every
 * run (ticks stalled); with the incident left to chance, ~1 run in 10 did.
 */
const servers: TestServer[] = [];
const proxies: PgProxy[] = [];
const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
afterAll(async () => {
  for (const s of servers) await s.stop().catch(() => {});
  for (const p of proxies) await p.close();
  await admin.end();
}, 60_000);

/** A test server on a fresh database, reached through a proxy of its own. */
async function proxiedServer(): Promise<{ server: TestServer; proxy: PgProxy; name: string }> {
  const proxy = await startPgProxy();
  proxies.push(proxy);
  const direct = await freshDatabase('srv');
  const server = await startTestServer({ DATABASE_URL: proxy.url(direct) });
  servers.push(server);
  return { server, proxy, name: new URL(direct).pathname.slice(1) };
}

/** Terminates the backends of the database (those started before `before` only, if given). */
async function terminateBackends(name: string, before?: Date): Promise<void> {
  const started = before ? admin`and backend_start < ${before}` : admin``;
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid() ${started}`;
}

/**
 * Terminates every backend of the database while the proxy holds array-type queries, and returns
 * once either the worker's ticks went on (new connections run no such query) or a tick started
 * after the last old connection closed has waited 300 ms: its query went to a new connection,
 * which is held in that query (startup on loopback takes ~5 ms).
 */
async function terminateMidTick(name: string, proxy: PgProxy, worker: ScheduledActionWorker): Promise<void> {
  proxy.holdTypes = true;
  const mark = proxy.accepted;
  const ticks = worker.ticks;
  const [{ armed }] = (await admin`select clock_timestamp() as armed`) as unknown as [{ armed: Date }];
  // Again while one is left: a connection still starting up was not in pg_stat_activity yet.
  await eventually(async () => {
    if (proxy.openAmongFirst(mark) === 0) return true;
    await terminateBackends(name, armed);
    await Bun.sleep(100);
    return false;
  }, 10_000);
  const gone = Date.now();
  await eventually(() => {
    const since = worker.tickingSince;
    return worker.ticks >= ticks + 4 || (since !== undefined && since > gone && Date.now() - since > 300);
  }, 10_000);
}

/** Live objects after a full collection, of the kinds a pending async chain is made of. */
function pending(): number {
  Bun.gc(true);
  const t = heapStats().objectTypeCounts as Record<string, number>;
  return (t.AsyncFunctionGenerator ?? 0) + (t.PromiseCombinatorsGlobalContext ?? 0);
}

test('after the database is dropped, the retry loops leave the heap flat and log once', async () => {
  const { server, proxy, name } = await proxiedServer();
  const worker = server.svc.scheduledActions!;
  await terminateMidTick(name, proxy, worker);
  // The termination may have failed a tick already ("…: working again" after it).
  const lines = worker.log.lines;
  const scheduler = server.svc.operations.scheduler!;
  const schedulerLines = scheduler.log.lines;
  await admin.unsafe(`drop database "${name}" with (force)`);
  // Counted in ticks of the scheduled-actions loop (one per 250 ms), not in elapsed time.
  await eventually(() => worker.log.failures >= 8, 60_000);
  const before = pending();
  const from = worker.log.failures;
  const dispatcher = server.svc.operations.dispatcher!;
  const claims = dispatcher.log.failures;
  await eventually(() => worker.log.failures >= from + 20, 60_000);
  const after = pending();
  // The dispatcher's claim loop goes on failing too (one round a second; a hung query stopped
  // any loop it met, not only the worker).
  expect(dispatcher.log.failures).toBeGreaterThanOrEqual(claims + 3);
  // The leak this guards against: postgres.js, listening on two channels through one pool, left
  // one never-settling LISTEN (an async function, a Promise.all and their closures) queued per
  // failed reconnect — hundreds a second, 23 GB after 1 h 45 m. Before that fix this grew by ~80
  // per tick; a bounded process varies by a handful.
  expect(after - before).toBeLessThan(100);
  // Twenty-eight failing ticks, one line.
  expect(worker.log.lines - lines).toBe(1);
  expect(scheduler.log.lines - schedulerLines).toBeLessThanOrEqual(1);
}, 180_000);

test('a database restart mid-tick: the loops go on failing while it is away, and a publish due then fires once it is back', async () => {
  const { server, proxy, name } = await proxiedServer();
  const worker = server.svc.scheduledActions!;
  const p = await gqlProject(server, MODELS, 'restart');
  const sk = await p.key('sk', ALL_SECRET);
  const pk = await p.key('pk', ['records:read']);
  const ok = async (key: string, query: string, variables: Record<string, unknown> = {}) => {
    const r = await p.gql(key, query, variables);
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
    return r.body.data;
  };
  const id = (await ok(sk, 'mutation{ createArticle(data:{ title:"Restarted" }){ _id } }')).createArticle._id;
  // Due while the database is away (the outage below starts within ~2 s).
  const at = Date.now() + 4000;
  await ok(sk, 'mutation($id:ID!,$at:DateTime!){ scheduleArticlePublish(_id:$id, at:$at){ id } }', {
    id,
    at: new Date(at).toISOString(),
  });

  await terminateMidTick(name, proxy, worker);
  // The server restarts: it refuses connections to the database (FATAL at startup, as while it
  // starts up), and the backends that were in the array-type query are terminated.
  await admin.unsafe(`alter database "${name}" allow_connections false`);
  await terminateBackends(name);
  expect(Date.now()).toBeLessThan(at);
  await eventually(() => Date.now() > at + 500, 10_000);
  const failures = worker.log.failures;
  // The worker's ticks go on (each one fails) rather than waiting for ever on one query.
  await eventually(() => worker.log.failures >= failures + 4, 30_000);
  expect(worker.fired).toBe(0);

  await admin.unsafe(`alter database "${name}" allow_connections true`);
  await eventually(() => worker.fired === 1, 30_000);
  await eventually(
    async () => (await ok(pk, 'query($id:ID!){ article(_id:$id){ title } }', { id })).article?.title === 'Restarted',
    30_000,
  );
  const actions = (await ok(sk, 'query{ scheduledActions(first: 10){ edges { node { status } } } }')).scheduledActions;
  expect(actions.edges.map((e: any) => e.node.status)).toEqual(['done']);
}, 180_000);
