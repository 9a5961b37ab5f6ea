/**
 * The operations peer (issue 28): graphile-worker, the PostgreSQL job queue, on the same
 * database, on Node 22 from bench/.peers. Its task does what a svc execution of the bench's no-op
 * operation does — one POST to the same endpoint, which answers at once — so both sides do the same
 * work per job; the queue is what is compared. `BENCH_COUNT` jobs are added 32 (`BENCH_CONNECTIONS`)
 * at a time with WorkerUtils.addJob (each its own transaction, as an application adds jobs) to a
 * runner with concurrency 32 (svc's per-project cap) and a pool of 34, LISTEN/NOTIFY on (its default).
 * Prints `GWJSON {…}`: jobs/s from the first add to the last completion, add → endpoint call
 * p50/p99, failed jobs, and this process's CPU per job.
 * Env: BENCH_DATABASE_URL, BENCH_ENDPOINT, BENCH_COUNT, BENCH_CONNECTIONS.
 */
import { makeWorkerUtils, run } from 'graphile-worker';

const connectionString = process.env.BENCH_DATABASE_URL;
const endpoint = process.env.BENCH_ENDPOINT;
const count = Number(process.env.BENCH_COUNT || 2000);
const concurrency = Number(process.env.BENCH_CONNECTIONS || 32);
const lat = [];
let done = 0;
let target = Infinity;
let errors = 0;
let firstError;
let finish;
let finished = new Promise((r) => (finish = r));

const runner = await run({
  connectionString,
  concurrency,
  // graphile-worker's docs: the pool must be larger than the concurrency.
  maxPoolSize: concurrency + 2,
  noHandleSignals: true,
  pollInterval: 2000,
  logger: undefined,
  taskList: {
    noop: async (payload) => {
      const at = Date.now();
      const res = await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      await res.text();
      if (!res.ok) throw new Error(`endpoint answered ${res.status}`);
      if (payload.t) lat.push(at - payload.t);
      if (++done >= target) finish();
    },
  },
});
runner.events.on('job:error', ({ error }) => {
  errors++;
  firstError ??= String(error?.message ?? error).slice(0, 200);
});
const utils = await makeWorkerUtils({ connectionString });

async function batch(n, stamp) {
  done = 0;
  target = n;
  finished = new Promise((r) => (finish = r));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        await utils.addJob('noop', stamp ? { t: Date.now() } : {}, { maxAttempts: 1 });
      }
    }),
  );
  await Promise.race([finished, new Promise((r) => setTimeout(r, 120_000))]);
  return (performance.now() - t0) / 1000;
}

await batch(Math.min(200, count), false); // warm-up: migrations done, JIT warm, pool full
lat.length = 0;
errors = 0;
const c0 = process.cpuUsage();
const seconds = await batch(count, true);
const c = process.cpuUsage(c0);
lat.sort((a, b) => a - b);
const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : 0);
console.log(
  `GWJSON ${JSON.stringify({ requests: done, seconds, rps: done / seconds, p50: q(0.5), p99: q(0.99), errors: errors + Math.max(0, count - done), firstError, cpuUsPerJob: (c.user + c.system) / Math.max(1, done) })}`,
);
await runner.stop();
await utils.release();
process.exit(0);
