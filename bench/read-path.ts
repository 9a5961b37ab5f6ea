/**
 * The read path without the socket (issue 31): the service's own CPU per request for the rows
 * read-trusted and read-cached, measured in one process, so a change of a fraction of a µs shows
 * where the HTTP rows (two processes sharing two cores with the load generator) cannot see it.
 *
 *   DATABASE_URL=postgres://…/<db> bun bench/read-path.ts [rounds]
 *
 * It starts the service in this process on a fresh database of that server (ephemeral ports,
 * SVC_LOG as set, default `text` with its lines discarded), seeds the bench project, pushes the
 * read document as a trusted document, then calls the listener's own handler of POST /graphql
 * (the route Bun.serve dispatches to) on prebuilt Requests, 1,000 at a time, 32 in flight, and
 * reports per request the median over rounds of the process's CPU time (user + system) and wall
 * time; with SVC_RESPONSE_CACHE=off, those of read-trusted-uncached and read-uncached (each
 * request a query of the database, whose own CPU is not counted). The floor beside it: `new Request` plus `await request.text()` and a `new Response` of
 * the same body, which every HTTP answer pays. Nothing here is a bench row; it is the tool the
 * figures of bench/NOTES.md (issue 31) were taken with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSettings } from '../src/env.ts';
import { startServer } from '../src/server.ts';
import * as graphqlHttp from '../src/http/graphql.ts';
import { buildApi } from '../src/http/api.ts';
import { openDatabase } from './database.ts';
import { READ_DOC } from './data.ts';
import { seedArticles, seedProject } from './seed.ts';
import { pushTrustedRead, TRUSTED_BODY } from './trusted.ts';

const ROUNDS = Number(process.argv[2] ?? 9);
const BATCH = 1_000;
const ROUND_MS = 400;
const CONCURRENCY = 32;

const db = await openDatabase();
const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-read-path-'));
const rootToken = `rt_bench_${Math.random().toString(16).slice(2)}`;
// The request log's lines are made as in the bench's service but not written anywhere.
process.stdout.write = (() => true) as typeof process.stdout.write;
const running = await startServer(
  readSettings({
    ...process.env,
    PORT: '0',
    REALTIME_PORT: '0',
    HOST: '127.0.0.1',
    SVC_LOG: process.env.SVC_LOG ?? 'text',
    SVC_DATA_DIR: dataDir,
    SVC_ROOT_TOKEN: rootToken,
    DATABASE_URL: db.url,
  }),
);
const report = (s: string) => process.stderr.write(`${s}\n`);
// seedProject writes its config folder under tmpdir(): removed with the rest at the end.
let configDir: string | undefined;
try {
  const apiUrl = running.apiUrl!;
  const seeded = await seedProject(apiUrl, rootToken, db.url);
  configDir = seeded.configDir;
  await seedArticles(apiUrl, seeded);
  await pushTrustedRead(apiUrl, seeded);
  const server = { requestIP: () => ({ address: '127.0.0.1', family: 'IPv4', port: 1 }) } as never;
  // Commits before the direct route (A/B against them): the Elysia app, hooks and all.
  const direct = (graphqlHttp as Record<string, unknown>).directGraphqlRoutes as
    | ((svc: typeof running.svc) => { '/graphql': { POST: (r: Request, s: never) => Promise<Response> } })
    | undefined;
  const app = direct ? undefined : buildApi(running.svc);
  const post = direct ? direct(running.svc)['/graphql'].POST : (r: Request) => app!.handle(r);
  const headers = { 'content-type': 'application/json', 'x-api-key': seeded.publicKey, accept: '*/*' };
  // As a client sends them: with a Content-Length (else the body is read through a counting stream).
  const requests = (body: string) =>
    Array.from(
      { length: BATCH },
      () =>
        new Request(`${apiUrl}/graphql`, {
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          body,
        }),
    );
  const bodies = { 'read-trusted': TRUSTED_BODY, 'read-cached': JSON.stringify({ query: READ_DOC }) };
  const answer = await (await post(requests(bodies['read-trusted'])[0]!, server)).text();
  if (!answer.startsWith('{"data"')) throw new Error(`unexpected answer: ${answer.slice(0, 200)}`);

  // 32 requests in flight, as bench/load.ts keeps 32 connections busy: uncached reads then share
  // the pool's connections and round trips as they do under load.
  const inFlight = async (batch: Request[], one: (r: Request) => Promise<unknown>) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < batch.length) await one(batch[next++]!);
      }),
    );
  };
  const cpuNs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) * 1_000;
  };
  // Rows measured in turns, round by round, so a drift of the shared box falls on each alike.
  async function timeAll(rows: { name: string; one: (r: Request) => Promise<unknown>; body: string }[]) {
    const cpu = rows.map(() => [] as number[]);
    const wall = rows.map(() => [] as number[]);
    for (const row of rows) for (let i = 0; i < 3; i++) await inFlight(requests(row.body), row.one);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [k, row] of rows.entries()) {
        let n = 0;
        let spentCpu = 0;
        let spentWall = 0;
        while (spentWall < ROUND_MS * 1e6) {
          const batch = requests(row.body);
          const c0 = cpuNs();
          const w0 = Bun.nanoseconds();
          await inFlight(batch, row.one);
          spentWall += Bun.nanoseconds() - w0;
          spentCpu += cpuNs() - c0;
          n += batch.length;
        }
        cpu[k]!.push(spentCpu / n / 1_000);
        wall[k]!.push(spentWall / n / 1_000);
      }
    }
    const med = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1]!;
    for (const [k, row] of rows.entries())
      report(
        `${row.name.padEnd(34)} CPU ${med(cpu[k]!).toFixed(2)} µs, wall ${med(wall[k]!).toFixed(2)} µs per request`,
      );
  }
  const floor = async (r: Request) => {
    await r.text();
    return new Response(answer, { headers: { 'content-type': 'application/json' } }).text();
  };
  const handled = async (r: Request) => (await post(r, server)).text();
  // SVC_RESPONSE_CACHE=off: the rows read-trusted-uncached and read-uncached measure.
  const off = !running.svc.settings.responseCache;
  await timeAll([
    { name: 'floor (read body, make a Response)', one: floor, body: bodies['read-trusted'] },
    {
      name: `read-trusted${off ? '-uncached' : ''}: POST /graphql handler`,
      one: handled,
      body: bodies['read-trusted'],
    },
    { name: `read-${off ? 'uncached' : 'cached'}: POST /graphql handler`, one: handled, body: bodies['read-cached'] },
  ]);
  report(`load average ${(await Bun.file('/proc/loadavg').text()).split(' ').slice(0, 3).join(' ')}`);
} finally {
  await running.stop();
  rmSync(dataDir, { recursive: true, force: true });
  if (configDir) rmSync(configDir, { recursive: true, force: true });
  await db.close();
}
