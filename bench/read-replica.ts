/**
 * `bun bench read-replica` (issue 32): the read-cached and read-uncached reads (READ_DOC, the same
 * ten articles) through a streaming replica beside the same reads on the primary, in one run, and
 * the write+read-back latency with read-your-writes on. Makes its own PostgreSQL 15 primary and
 * hot standby (test/support/standby.ts: Debian's postgresql-15 binaries; the bench's database is
 * not used), then one service process at a time on it, loaded as every other row:
 *
 * - `read-replica/primary`, `read-replica`: cached (response cache on), on the primary / with
 *   `DATABASE_READ_URL` naming the standby;
 * - `read-replica/primary-uncached`, `read-replica/uncached`: `SVC_RESPONSE_CACHE=off`, every
 *   request runs its SQL;
 * - write+read-back, one round at a time: an update and a publish, then a public read of the
 *   record — on the replica service presenting the publish's `x-svc-lsn`. Figures: the read-back's
 *   p50 and p99 (ms); a read that returned the state before the write counts as an error.
 *
 * On one box the standby shares the cores with the primary and the service: the rows show what
 * routing costs and that reads leave the primary, not what a second machine adds.
 */
import { READ_DOC } from './data.ts';
import { runLoad, loadgenName } from './drive.ts';
import { rssWindow } from './procs.ts';
import type { Row } from './report.ts';
import type { Figure } from './results.ts';
import { gql, seedArticles, seedProject, type Seeded } from './seed.ts';
import { startService } from './targets.ts';
import type { LoadPlan } from './load.ts';
import { replicatedDatabase, standbyUnavailable, startStandbyPair } from '../test/support/standby.ts';

export const READ_REPLICA_ROWS = [
  'read-replica/primary',
  'read-replica',
  'read-replica/primary-uncached',
  'read-replica/uncached',
] as const;

export interface ReplicaRun {
  rows: Row[];
  figures: Record<string, Figure>;
  notes: string[];
}

interface Setup {
  name: (typeof READ_REPLICA_ROWS)[number];
  replica: boolean;
  cached: boolean;
}

const SETUPS: Setup[] = [
  { name: 'read-replica/primary', replica: false, cached: true },
  { name: 'read-replica', replica: true, cached: true },
  { name: 'read-replica/primary-uncached', replica: false, cached: false },
  { name: 'read-replica/uncached', replica: true, cached: false },
];

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Update + publish, then read back at once; `lsn`: present the publish's x-svc-lsn. */
async function writeReadBack(
  url: string,
  s: Seeded,
  id: string,
  rounds: number,
  lsn: boolean,
): Promise<{ readBack: number[]; total: number[]; stale: number }> {
  const readBack: number[] = [];
  const total: number[] = [];
  let stale = 0;
  const post = (key: string, query: string, variables: unknown, headers: Record<string, string> = {}) =>
    fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
      body: JSON.stringify({ query, variables }),
      signal: AbortSignal.timeout(15_000),
    });
  for (let i = 0; i < rounds; i++) {
    const title = `read-back ${lsn ? 'r' : 'p'} ${i}`;
    const t0 = performance.now();
    await gql(
      url,
      s.secretKey,
      'mutation($id: ID!, $t: String) { updateArticle(_id: $id, data: { title: $t }) { _id } }',
      {
        id,
        t: title,
      },
    );
    const pub = await post(s.secretKey, 'mutation($id: ID!) { publishArticleVersion(_id: $id) { _id } }', { id });
    await pub.text();
    const at = pub.headers.get('x-svc-lsn');
    if (lsn && !at) throw new Error('the publish answered no x-svc-lsn');
    const t1 = performance.now();
    const read = (await (
      await post(s.publicKey, 'query($id: ID!) { article(_id: $id) { title } }', { id }, at ? { 'x-svc-lsn': at } : {})
    ).json()) as { data?: { article?: { title?: string } } };
    const t2 = performance.now();
    if (read.data?.article?.title !== title) stale++;
    readBack.push(t2 - t1);
    total.push(t2 - t0);
  }
  readBack.sort((a, b) => a - b);
  total.sort((a, b) => a - b);
  return { readBack, total, stale };
}

export async function runReadReplica(o: { quick: boolean }): Promise<ReplicaRun> {
  const out: ReplicaRun = { rows: [], figures: {}, notes: [] };
  const na = (why: string) => {
    for (const name of READ_REPLICA_ROWS)
      if (!out.rows.some((r) => r.name === name)) out.rows.push({ name, shape: 'read', reference: false, na: why });
    return out;
  };
  const missing = standbyUnavailable();
  if (missing) return na(missing.split(':')[0]!);
  const seconds = Number(process.env.BENCH_DURATION || (o.quick ? 3 : 10));
  const rounds = Number(process.env.BENCH_READ_BACK_ROUNDS || (o.quick ? 50 : 200));
  let pair: Awaited<ReturnType<typeof startStandbyPair>> | undefined;
  try {
    pair = await startStandbyPair({ maxConnections: 200 });
    const { primaryDb, standbyDb } = await replicatedDatabase(pair, 'svc_bench');
    let seeded: { s: Seeded; id: string } | undefined;
    for (const setup of SETUPS) {
      const svc = await startService(primaryDb, {
        env: {
          SVC_LOG: 'off',
          SVC_RESPONSE_CACHE: setup.cached ? 'on' : 'off',
          ...(setup.replica ? { DATABASE_READ_URL: standbyDb } : {}),
        },
      });
      try {
        if (!seeded) {
          const s = await seedProject(svc.url, svc.rootToken, primaryDb);
          await seedArticles(svc.url, s);
          const list = await gql(svc.url, s.publicKey, '{ articles(first: 1) { edges { node { _id } } } }');
          seeded = { s, id: list.data.articles.edges[0].node._id };
          out.notes.push(...s.notes);
        }
        const { s, id } = seeded;
        if (setup.replica) {
          // In rotation before the load starts (its first poll may predate the seeding's replay).
          const end = Date.now() + 30_000;
          while (Date.now() < end) {
            const h = (await (await fetch(`${svc.url}/health`)).json()) as { replicas?: { state: string }[] };
            if (h.replicas?.[0]?.state === 'up') break;
            await Bun.sleep(100);
          }
        }
        const plan: LoadPlan = {
          url: svc.endpoint,
          mode: 'request',
          body: JSON.stringify({ query: READ_DOC }),
          headerSets: [{ 'x-api-key': s.publicKey }],
          connections: Number(process.env.BENCH_CONNECTIONS || 32),
          warmupMs: o.quick ? 1_000 : 2_000,
          durationMs: seconds * 1000,
        };
        process.stderr.write(
          `bench: ${setup.name} (${loadgenName(plan)}, ${plan.connections} connections, ${seconds} s) … `,
        );
        const rss = rssWindow(svc.child.pid);
        const result = await runLoad(plan);
        const rssMb = rss.end();
        process.stderr.write(`${result.rps.toFixed(0)} req/s\n`);
        out.rows.push(
          result.requests > 0
            ? { name: setup.name, shape: 'read', reference: false, result: { ...result, rssMb } }
            : { name: setup.name, shape: 'read', reference: false, na: `no successful request: ${result.firstError}` },
        );
        if (result.errors > 0)
          out.notes.push(`${setup.name}: ${result.errors} failed requests (first: ${result.firstError})`);
        if (setup.replica) {
          const h = (await (await fetch(`${svc.url}/health`)).json()) as {
            replicas: { reads: number; fallbacks: number; state: string }[];
          };
          const m = /svc_replica_primary_reads_total (\d+)/.exec(await (await fetch(`${svc.url}/metrics`)).text());
          out.notes.push(
            `${setup.name}: published reads routed to the standby ${h.replicas[0]!.reads}, to the primary ${m?.[1] ?? '?'} (fallbacks ${h.replicas[0]!.fallbacks}, standby ${h.replicas[0]!.state} at the end)`,
          );
        }
        if (!setup.cached) {
          const r = await writeReadBack(svc.url, s, id, rounds, setup.replica);
          const tag = setup.replica ? 'read-replica/read-back' : 'read-replica/primary-read-back';
          out.figures[`${tag}-p50`] = { value: pct(r.readBack, 50), unit: 'ms', errors: r.stale };
          out.figures[`${tag}-p99`] = { value: pct(r.readBack, 99), unit: 'ms', errors: r.stale };
          out.notes.push(
            `${tag}: ${rounds} rounds of update + publish then a public read${setup.replica ? ' presenting x-svc-lsn' : ''}: read-back p50 ${pct(r.readBack, 50).toFixed(2)} ms, p99 ${pct(r.readBack, 99).toFixed(2)} ms; write+read p50 ${pct(r.total, 50).toFixed(2)} ms; stale reads ${r.stale}`,
          );
        }
      } finally {
        await svc.stop();
      }
    }
    out.notes.push(
      'read-replica: a PostgreSQL 15 primary and hot standby of its own on the same box (test/support/standby.ts), one service process at a time',
    );
  } catch (err) {
    out.notes.push(`read-replica: ${(err as Error).message.split('\n')[0]}`);
    return na((err as Error).message.split('\n')[0]!.slice(0, 120));
  } finally {
    await pair?.stop();
  }
  return out;
}
