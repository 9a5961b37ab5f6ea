/**
 * `bun bench/read-replica.ts`: published reads through a streaming replica beside the same reads
 * on the primary, in one run (issue 32). Makes its own PostgreSQL 15 primary and hot standby
 * (test/support/standby.ts: needs Debian's postgresql-15 binaries; the suite's server is not
 * touched), then, one service at a time in this process with the load in its own process
 * (bench/load.ts, 32 connections, `BENCH_SECONDS` s each):
 *
 * - `read-primary` / `read-replica`, cached: one list query, the response cache on;
 * - the same uncached (`SVC_RESPONSE_CACHE=off`): every request runs its SQL;
 * - write+read-back: an update and publish, then a public read presenting the publish's
 *   `x-svc-lsn`, one at a time (`BENCH_ROUNDS`): the read-back's latency with read-your-writes on.
 *
 * On one box the replica shares the cores with the primary: the rows show what routing costs and
 * that reads move off the primary, not what a second machine adds.
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { onDatabase, standbyUnavailable, startStandbyPair } from '../test/support/standby.ts';
import { startTestServer, type TestServer } from '../test/support/server.ts';
import { gqlProject } from '../test/graphql/helpers.ts';
import { insertApiKey } from '../src/auth/api-keys.ts';
import type { ModelDef } from '../src/projects/types.ts';
import type { LoadResult } from './load.ts';

const SECONDS = Number(process.env.BENCH_SECONDS || 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS || 50);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS || 32);
const MODELS = [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text', required: true }] }] as ModelDef[];
const LIST = JSON.stringify({ query: '{ posts(first: 20) { edges { node { _id title } } } }' });

async function load(url: string, key: string): Promise<LoadResult> {
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'plan.json');
  writeFileSync(
    file,
    JSON.stringify({
      url: `${url}/graphql`,
      mode: 'request',
      body: LIST,
      headerSets: [{ 'content-type': 'application/json', 'x-api-key': key }],
      connections: CONNECTIONS,
      warmupMs: 500,
      durationMs: SECONDS * 1000,
    }),
  );
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, 'load.ts'), file], {
    stdout: 'pipe',
    stderr: 'inherit',
  });
  const out = await new Response(proc.stdout).text();
  const line = out.split('\n').find((l) => l.startsWith('LOADJSON '));
  if (!line) throw new Error(`load generator printed no result: ${out.slice(0, 300)}`);
  return JSON.parse(line.slice(9));
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const missing = standbyUnavailable();
  if (missing) {
    console.log(`skip: ${missing}`);
    return;
  }
  const pair = await startStandbyPair();
  const rows: string[] = [];
  try {
    const admin = postgres(pair.primaryUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe('create database svc_bench');
    await admin.end();
    const db = onDatabase(pair.primaryUrl, 'svc_bench');
    const replicaDb = onDatabase(pair.standbyUrl, 'svc_bench');
    for (;;) {
      try {
        const c = postgres(replicaDb, { max: 1, onnotice: () => {} });
        await c`select 1`;
        await c.end();
        break;
      } catch {
        await Bun.sleep(200);
      }
    }
    let keys: { pk: string; sk: string; id: string } | undefined;
    for (const cached of [true, false]) {
      for (const replica of [false, true]) {
        const env: Record<string, string> = { DATABASE_URL: db, SVC_RESPONSE_CACHE: cached ? 'on' : 'off' };
        if (replica) Object.assign(env, { DATABASE_READ_URL: replicaDb, SVC_REPLICA_POLL_MS: '50' });
        const server: TestServer = await startTestServer(env);
        try {
          if (!keys) {
            const p = await gqlProject(server, MODELS);
            const sk = await p.key('sk', ['records:read', 'records:write', 'records:publish', 'drafts:read']);
            // The load is far past a key's default hourly limit.
            const pk = (
              await insertApiKey(server.svc.sql, {
                tenantId: p.tenantId,
                projectId: p.projectId,
                kind: 'pk',
                name: 'bench-replica',
                scopes: ['records:read'],
                rateLimit: 2_000_000_000,
              })
            ).key;
            let id = '';
            for (let i = 0; i < 100; i++) {
              const c = await p.gql(sk, 'mutation($t: String!) { createPost(data: { title: $t }) { _id } }', {
                t: `Post ${i}`,
              });
              id = c.body.data.createPost._id;
              await p.gql(sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', { id });
            }
            keys = { pk, sk, id };
          }
          const r = await load(server.apiUrl, keys.pk);
          const name = `read-${replica ? 'replica' : 'primary'}${cached ? '' : '/uncached'}`;
          const served = replica
            ? ` (replica served ${server.svc.replicas!.status()[0]!.reads}, primary ${server.svc.replicas!.primaryReads})`
            : '';
          if (r.errors) console.error(`${name}: ${r.errors} errors, first: ${r.firstError}`);
          rows.push(
            `| ${name} | ${Math.round(r.rps)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.errors}${served} |`,
          );
          if (!cached) {
            // Write, then read back what was written presenting the write's LSN.
            const readBack: number[] = [];
            const total: number[] = [];
            let stale = 0;
            for (let i = 0; i < ROUNDS; i++) {
              const t0 = performance.now();
              const gql = (key: string, query: string, variables: unknown, headers: Record<string, string> = {}) =>
                fetch(`${server.apiUrl}/graphql`, {
                  method: 'POST',
                  headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
                  body: JSON.stringify({ query, variables }),
                });
              await (
                await gql(
                  keys.sk,
                  'mutation($id: ID!, $t: String!) { updatePost(_id: $id, data: { title: $t }) { _id } }',
                  { id: keys.id, t: `round ${i}` },
                )
              ).text();
              const pub = await gql(keys.sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', {
                id: keys.id,
              });
              await pub.text();
              const lsn = pub.headers.get('x-svc-lsn');
              const t1 = performance.now();
              const read = (await (
                await gql(
                  keys.pk,
                  'query($id: ID!) { post(_id: $id) { title } }',
                  { id: keys.id },
                  lsn ? { 'x-svc-lsn': lsn } : {},
                )
              ).json()) as any;
              const t2 = performance.now();
              if (read.data?.post?.title !== `round ${i}`) stale++;
              readBack.push(t2 - t1);
              total.push(t2 - t0);
            }
            readBack.sort((a, b) => a - b);
            total.sort((a, b) => a - b);
            rows.push(
              `| write+read-back (${replica ? 'replica, x-svc-lsn' : 'primary'}) | ${ROUNDS} rounds | read-back p50 ${pct(readBack, 50).toFixed(2)} | p99 ${pct(readBack, 99).toFixed(2)}; write+read p50 ${pct(total, 50).toFixed(2)} ms | stale reads: ${stale} |`,
            );
          }
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    await pair.stop();
  }
  console.log(`\n| row | req/s | p50 ms | p99 ms | errors |\n|---|---:|---:|---:|---|\n${rows.join('\n')}`);
}

await main();
