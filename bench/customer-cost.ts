/**
 * `auth-customer`, in-process part (issue 12 "Speed"): what a customer token adds to an
 * uncached read, measured in CPU time rather than over HTTP, where two load runs on this shared
 * box differ by more than the whole target. Run by bench/auth-rows.ts as its own child process beside
 * the service, on the bench database:
 *
 *   bun bench/customer-cost.ts <input.json>     input: { databaseUrl, publicKey, token }
 *
 * It opens a Service on that database with the response cache off (like one more process of
 * the service, serving the read the way a token-bearing read is always served), and runs the
 * read-cached document as a request does after HTTP: `Gate.authenticate` on request `Headers`
 * (key only, or key + `Authorization: Bearer`), then `execute` with the principal it returned,
 * 16 requests in flight. Key-only and token rounds alternate, 30 rounds each (`BENCH_CUSTOMER_ROUNDS`), 200 ms per round;
 * a round's figure is the process' CPU time (user + system, `process.cpuUsage`: every thread,
 * PostgreSQL's wait excluded) divided by the requests it served. Prints `CUSTJSON {…}`: the
 * medians and the median of the per-round differences (token round minus the key-only round
 * next to it), which is what the token path costs.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSettings } from '../src/env.ts';
import { openService } from '../src/service.ts';
import { execute } from '../src/graphql/execute.ts';
import { READ_DOC } from './data.ts';

export interface CustomerCost {
  /** ns of CPU per request: authenticate + execute, key only (uncached read). */
  keyOnly: number;
  /** The same with the customer token. */
  withToken: number;
  /** Median over rounds of (token round − neighbouring key-only round), ns per request. */
  extra: number;
  /** Quartiles of those differences: how much the box's noise moves one round. */
  extraQ1: number;
  extraQ3: number;
  rounds: number;
}

const ROUNDS = Math.max(2, Number(process.env.BENCH_CUSTOMER_ROUNDS || 30));
const ROUND_MS = 200;
const IN_FLIGHT = 16;

function headersFor(key: string, token?: string): Headers {
  const h = new Headers({
    host: '127.0.0.1:4000',
    'content-type': 'application/json',
    'content-length': '94',
    'x-api-key': key,
  });
  if (token) h.set('authorization', `Bearer ${token}`);
  return h;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuNs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};

async function main(): Promise<void> {
  const input = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as {
    databaseUrl: string;
    publicKey: string;
    token: string;
  };
  const settings = readSettings({
    DATABASE_URL: input.databaseUrl,
    SVC_DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-bench-customer-')),
    SVC_ROOT_TOKEN: `rt_bench_customer_${process.pid}`,
    SVC_RESPONSE_CACHE: 'off',
    PORT: '0',
    REALTIME_PORT: '0',
  });
  const svc = await openService(settings);
  try {
    const req = { query: READ_DOC, variables: null, operationName: null };
    const one = async (headers: Headers) => {
      const caller = await svc.gate.authenticate({ headers });
      const out = await execute(svc, caller.key, req, { method: 'POST', customer: caller.customer });
      if (out.body === undefined) throw new Error(`read failed: ${JSON.stringify(out.result).slice(0, 200)}`);
    };
    const keyOnly = headersFor(input.publicKey);
    const withToken = headersFor(input.publicKey, input.token);
    const round = async (headers: Headers, ms: number): Promise<number> => {
      let n = 0;
      const c0 = cpuNs();
      const end = performance.now() + ms;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (performance.now() < end) {
            await one(headers);
            n++;
          }
        }),
      );
      return (cpuNs() - c0) / n;
    };
    // Warm-up: both paths compiled, the token verified and its targeting context resolved.
    await round(keyOnly, 1000);
    await round(withToken, 1000);
    const plain: number[] = [];
    const token: number[] = [];
    const extra: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Order flipped every round, so a drift in the box's load falls on both sides.
      if (r % 2 === 0) {
        plain.push(await round(keyOnly, ROUND_MS));
        token.push(await round(withToken, ROUND_MS));
      } else {
        token.push(await round(withToken, ROUND_MS));
        plain.push(await round(keyOnly, ROUND_MS));
      }
      extra.push(token[r]! - plain[r]!);
    }
    const sorted = [...extra].sort((a, b) => a - b);
    const q = (f: number) => sorted[Math.floor(f * (sorted.length - 1))]!;
    const out: CustomerCost = {
      keyOnly: median(plain),
      withToken: median(token),
      extra: median(extra),
      extraQ1: q(0.25),
      extraQ3: q(0.75),
      rounds: ROUNDS,
    };
    console.log(`CUSTJSON ${JSON.stringify(out)}`);
  } finally {
    await svc.close();
  }
}

if (import.meta.main) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(`customer-cost: ${(err as Error).stack ?? err}`);
      process.exit(1);
    },
  );
}
