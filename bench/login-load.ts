import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startChild } from './procs.ts';
import type { Row } from './report.ts';
import type { LoadPlan } from './load.ts';

/**
 * Scenario `login-load` (issue 12 "Speed"): login is deliberately slow (argon2id) but must not
 * block other requests. The cached read (the `read-cached` document, `pk_` key) is measured
 * three times on the same service, same plan: alone, while bench/logins.ts (its own process)
 * runs 20 `loginCustomer` per second (`BENCH_LOGIN_RATE`), and alone again. The two runs
 * without logins are the reference beside it (repeated, since the box is shared): the section
 * under the table gives the p99 with logins against the worse of the two.
 */
export interface LoginLoad {
  lines: string[];
  notes: string[];
}

type Measure = (name: string, plan: LoadPlan) => Promise<Row | undefined>;

export async function runLoginLoad(
  graphql: string,
  publicKey: string,
  plan: LoadPlan,
  measure: Measure,
): Promise<LoginLoad> {
  const rate = Number(process.env.BENCH_LOGIN_RATE || 20);
  const before = await measure('login-load/idle', plan);
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'logins.json');
  const seconds = (plan.warmupMs + plan.durationMs) / 1000 + 1;
  writeFileSync(file, JSON.stringify({ graphql, publicKey, rate, seconds, customers: 40 }));
  const driver = startChild(process.execPath, [join(import.meta.dir, 'logins.ts'), file], {
    label: 'logins',
    cwd: join(import.meta.dir, '..'),
  });
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    driver.proc.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('READY')) resolve();
    });
    driver.proc.once('exit', () => reject(new Error(`bench/logins.ts stopped: ${driver.tail()}`)));
  });
  let during: Row | undefined;
  try {
    await ready;
    during = await measure('login-load', plan);
    const timer = setTimeout(() => void driver.stop('SIGKILL', 0), 120_000);
    await new Promise<void>((r) => (driver.exited() ? r() : driver.proc.once('exit', () => r())));
    clearTimeout(timer);
  } finally {
    await driver.stop();
  }
  // Logins the service had queued when the driver stopped are still being verified: one more
  // login (an unknown address: it waits for the same hasher queue) answers once they are done.
  const t0 = Date.now();
  await fetch(graphql, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': publicKey },
    body: JSON.stringify({
      query: 'mutation { loginCustomer(email: "drain-probe@example.com", password: "drain probe pw") { accessToken } }',
    }),
    signal: AbortSignal.timeout(180_000),
  }).then((r) => r.text());
  const drainS = (Date.now() - t0) / 1000;
  const after = await measure('login-load/idle-after', plan);
  const m = /LOGINJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`bench/logins.ts printed no result: ${driver.tail()}`);
  const l = JSON.parse(m[1]!) as { sent: number; failed: number; rate: number; p50: number; p99: number };
  const p99 = (r: Row | undefined) => r?.result?.p99 ?? NaN;
  const idle = Math.max(p99(before), p99(after));
  const lines = [
    '## Login under load',
    '',
    `Cached reads (read-cached document, ${plan.connections} connections) while bench/logins.ts sends ${rate} \`loginCustomer\`/s (argon2id), beside the same read without logins just before and just after (issue 12: logins must not block other requests).`,
    '',
    '| measure | value |',
    '|---|---:|',
    `| cached read p99, no logins (before / after) | ${p99(before).toFixed(2)} / ${p99(after).toFixed(2)} ms |`,
    `| cached read p99 while ${rate} logins/s run | ${p99(during).toFixed(2)} ms |`,
    `| → p99 with logins ÷ worse p99 without | ${(p99(during) / idle).toFixed(2)} × |`,
    `| cached read req/s: before / during / after | ${(before?.result?.rps ?? NaN).toFixed(0)} / ${(during?.result?.rps ?? NaN).toFixed(0)} / ${(after?.result?.rps ?? NaN).toFixed(0)} |`,
    `| logins: sent, failed, achieved per second | ${l.sent}, ${l.failed}, ${l.rate.toFixed(1)} |`,
    `| login latency p50 / p99 (open loop: queueing included) | ${l.p50.toFixed(0)} / ${l.p99.toFixed(0)} ms |`,
    `| logins still queued when the driver stopped took | ${drainS.toFixed(1)} s to finish |`,
    '',
  ];
  return { lines, notes: l.failed ? [`login-load: ${l.failed} of ${l.sent} logins failed`] : [] };
}
