/**
 * `auth-cost`: what authenticating a request costs, measured in-process (issue 5 "Speed").
 * Run by bench/auth-rows.ts as its own child process, beside the service, on the bench database:
 *
 *   bun bench/auth-cost.ts <input.json>     input: { databaseUrl, tenantId, projectId, publicKey }
 *
 * It opens a Service on that database (its own key cache, rate limiter and bus, like one more
 * process of the service), writes 1,000 `pk_` keys with `records:read`, warms them (one request
 * each: the only key query), then times, on warmed keys:
 *
 * - `auth`: `Gate.admit` (authenticate + charge) — the whole authentication layer of a
 *   request (header read, hash, key lookup, liveness/origin checks, principal with its schema
 *   fingerprint, rate-limit count), with 1 key and with 1,000 keys in rotation;
 * - `read`: `execute` of the read-cached document on a warmed response cache — the
 *   GraphQL part of a cached read, the strictest denominator (it excludes HTTP entirely).
 *
 * Each figure is the median of 7 rounds of ≥ 300 ms. It also counts the key queries its key
 * cache made while timing: 0 when keys come from memory. Prints one `AUTHJSON {…}` line.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSettings } from '../src/env.ts';
import { openService } from '../src/service.ts';
import { insertApiKey } from '../src/auth/api-keys.ts';
import { execute } from '../src/graphql/execute.ts';
import { READ_DOC } from './data.ts';

export interface AuthCost {
  /** ns per request: Gate.admit, one warmed key. */
  auth1: number;
  /** The same with 1,000 warmed keys in rotation. */
  auth1000: number;
  /** ns per request: Gate.authenticate alone, 1,000 keys. */
  authenticate1000: number;
  /** ns per request: Gate.charge alone, 1,000 keys. */
  rate1000: number;
  /** ns per request: execute of the cached read (response cache hit). */
  read: number;
  /** Key queries (api_keys) the key cache made while timing. */
  keyQueries: number;
}

const ROUNDS = 7;
const ROUND_MS = 300;

async function time(fn: (i: number) => unknown): Promise<number> {
  const samples: number[] = [];
  // Warm-up: let the JIT settle.
  for (let i = 0; i < 20_000; i++) await fn(i);
  for (let r = 0; r < ROUNDS; r++) {
    let n = 0;
    const t0 = Bun.nanoseconds();
    let t = t0;
    while (t - t0 < ROUND_MS * 1e6) {
      for (let j = 0; j < 1000; j++) await fn(n++);
      t = Bun.nanoseconds();
    }
    samples.push((t - t0) / n);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

/** Request headers as Bun.serve hands them over for a wrk request. */
function headersFor(key: string): Headers {
  return new Headers({
    host: '127.0.0.1:4000',
    'content-type': 'application/json',
    'content-length': '94',
    'x-api-key': key,
  });
}

async function main(): Promise<void> {
  const input = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as {
    databaseUrl: string;
    tenantId: string;
    projectId: string;
    publicKey: string;
  };
  const settings = readSettings({
    DATABASE_URL: input.databaseUrl,
    SVC_DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-bench-auth-')),
    SVC_ROOT_TOKEN: `rt_bench_auth_${process.pid}`,
    PORT: '0',
    REALTIME_PORT: '0',
  });
  const svc = await openService(settings);
  try {
    const keys: string[] = [];
    for (let i = 0; i < 1000; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          insertApiKey(svc.sql, {
            tenantId: input.tenantId,
            projectId: input.projectId,
            kind: 'pk',
            name: `auth-cost-${i + j}`,
            scopes: ['records:read'],
            rateLimit: 2_000_000_000,
          }),
        ),
      );
      keys.push(...batch.map((k) => k.key));
    }
    const headers = keys.map(headersFor);
    const { gate } = svc;
    for (const h of headers) await gate.admit({ headers: h });
    const principals = await Promise.all(headers.map(async (h) => (await gate.authenticate({ headers: h })).key));
    const req = { query: READ_DOC, variables: null, operationName: null };
    const opts = { method: 'POST' as const, customer: null };
    const warm = await execute(svc, principals[0]!, req, opts);
    if (warm.body === undefined) throw new Error(`cached read failed: ${JSON.stringify(warm.result).slice(0, 200)}`);

    const before = gate.keys.loads;
    const one = { headers: headers[0]! };
    const auth1 = await time(() => gate.admit(one));
    const auth1000 = await time((i) => gate.admit({ headers: headers[i % 1000]! }));
    const authenticate1000 = await time((i) => gate.authenticate({ headers: headers[i % 1000]! }));
    const rate1000 = await time((i) => gate.charge(principals[i % 1000]!, 1));
    const read = await time(() => execute(svc, principals[0]!, req, opts));
    const keyQueries = gate.keys.loads - before;
    const out: AuthCost = { auth1, auth1000, authenticate1000, rate1000, read, keyQueries };
    console.log(`AUTHJSON ${JSON.stringify(out)}`);
  } finally {
    await svc.close();
  }
}

if (import.meta.main) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(`auth-cost: ${(err as Error).stack ?? err}`);
      process.exit(1);
    },
  );
}
