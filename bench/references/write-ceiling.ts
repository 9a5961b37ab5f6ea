/**
 * The `write-ceiling` reference (issue 11): bare single-row INSERT commits into a jsonb table
 * from Bun.SQL, N concurrent loops, on the bench database in the same run as `write` — what this
 * PostgreSQL on this machine commits per second when nothing else is asked of it. Run as its own
 * process: `bun bench/references/write-ceiling.ts plan.json`; prints `LOADJSON {...}`.
 */
import { readFileSync } from 'node:fs';
import { SQL } from 'bun';

interface Plan {
  databaseUrl: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
}

const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Plan;
const sql = new SQL({ url: plan.databaseUrl, max: plan.connections });
await sql.unsafe('create schema if not exists bench_ref');
await sql.unsafe('create table if not exists bench_ref.write_ceiling (id bigserial primary key, data jsonb not null)');
const data = JSON.stringify({
  title: 'Written',
  slug: 'written',
  summary: 'written by the bench',
  rating: 42,
  featured: true,
});
const lat: number[] = [];
let measuring = false;
let stop = false;
const loops = Array.from({ length: plan.connections }, async () => {
  while (!stop) {
    const t0 = performance.now();
    await sql.unsafe('insert into bench_ref.write_ceiling (data) values ($1::text::jsonb)', [data]);
    if (measuring) lat.push(performance.now() - t0);
  }
});
await Bun.sleep(plan.warmupMs);
measuring = true;
const t0 = performance.now();
await Bun.sleep(plan.durationMs);
measuring = false;
const seconds = (performance.now() - t0) / 1000;
stop = true;
await Promise.all(loops);
await sql.close();
lat.sort((a, b) => a - b);
const pct = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))]! : 0);
const cpu = process.cpuUsage();
console.log(
  `LOADJSON ${JSON.stringify({ requests: lat.length, seconds, rps: lat.length / seconds, p50: pct(50), p99: pct(99), errors: 0, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}`,
);
process.exit(0);
