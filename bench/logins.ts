/**
 * The login driver of scenario `login-load` (bench/login-load.ts), its own process:
 *
 *   bun bench/logins.ts <input.json>    input: { graphql, publicKey, rate, seconds, customers }
 *
 * Registers `customers` accounts (not timed), prints `READY`, then sends `loginCustomer` at
 * `rate` per second for `seconds`, open loop (a login starts every 1/rate s whether or not the
 * ones before have answered, so a slow service is not let off by a waiting client), and prints
 * one `LOGINJSON {…}` line: logins sent, failed, achieved rate, latency p50/p99 in ms.
 */
import { readFileSync } from 'node:fs';

interface Input {
  graphql: string;
  publicKey: string;
  rate: number;
  seconds: number;
  customers: number;
}

const PASSWORD = 'bench login pw 1';

async function call(input: Input, query: string, variables: Record<string, unknown>): Promise<boolean> {
  const res = await fetch(input.graphql, {
    // A login still unanswered after 30 s counts as failed (the run must end).
    signal: AbortSignal.timeout(30_000),
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': input.publicKey },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: unknown; errors?: unknown[] };
  return res.status === 200 && !body.errors;
}

const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;

async function main(): Promise<void> {
  const input = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Input;
  const emails = Array.from({ length: input.customers }, (_, i) => `login-${process.pid}-${i}@example.com`);
  for (const e of emails) {
    if (
      !(await call(
        input,
        'mutation($e: String!, $p: String!) { registerCustomer(email: $e, password: $p) { accessToken } }',
        { e, p: PASSWORD },
      ))
    ) {
      throw new Error(`registering ${e} failed`);
    }
  }
  console.log('READY');
  const latencies: number[] = [];
  let failed = 0;
  let sent = 0;
  const inflight: Promise<void>[] = [];
  const t0 = performance.now();
  const end = t0 + input.seconds * 1000;
  const gap = 1000 / input.rate;
  for (let next = t0; next < end; next += gap) {
    const wait = next - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    const e = emails[sent++ % emails.length]!;
    const start = performance.now();
    inflight.push(
      call(input, 'mutation($e: String!, $p: String!) { loginCustomer(email: $e, password: $p) { accessToken } }', {
        e,
        p: PASSWORD,
      }).then(
        (ok) => {
          if (ok) latencies.push(performance.now() - start);
          else failed++;
        },
        () => void failed++,
      ),
    );
  }
  await Promise.all(inflight);
  const wall = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  console.log(
    `LOGINJSON ${JSON.stringify({ sent, failed, rate: latencies.length / wall, p50: pct(latencies, 50), p99: pct(latencies, 99) })}`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`logins: ${(err as Error).message}`);
    process.exit(1);
  },
);
