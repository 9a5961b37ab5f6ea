/**
 * The `operations` scenario's driver, run as its own process (bench/operations-scenario.ts starts it). Input
 * JSON file: { graphql, sse, apiKey, endpoint, count, connections }.
 *  1. reference: `count` POSTs straight to the endpoint from Bun, `connections` at a time;
 *  2. the service: `count` executeOperation mutations, `connections` at a time, while an SSE
 *     stream on `jobs:*` collects `job.completed` events. Executions per second run from the
 *     first mutation sent to the last completed event; dispatch latency is mutation sent →
 *     the endpoint received the call (the endpoint's own clock, same machine).
 * Prints `OPSJSON {…}`.
 */
import { readFileSync } from 'node:fs';

interface Input {
  graphql: string;
  sse: string;
  apiKey: string;
  endpoint: string;
  count: number;
  connections: number;
}
const input = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Input;
const now = () => performance.timeOrigin + performance.now();
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

async function pool(n: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: input.connections }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

// 1. Direct calls: the ceiling.
const direct: number[] = [];
const d0 = now();
await pool(input.count, async () => {
  const t = now();
  const res = await fetch(input.endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"input":{"n":1}}',
  });
  await res.arrayBuffer();
  direct.push(now() - t);
});
const directSeconds = (now() - d0) / 1000;

// 2. The service, observed through the realtime gateway.
const completed = new Map<string, number>();
let errors = 0;
let firstError: string | undefined;
const abort = new AbortController();
const stream = await fetch(
  `${input.sse}/sse/${encodeURIComponent('jobs:*')}?apiKey=${encodeURIComponent(input.apiKey)}`,
  { signal: abort.signal },
);
if (!stream.ok || !stream.body) throw new Error(`SSE jobs:* answered ${stream.status}`);
let connected!: () => void;
const ready = new Promise<void>((r) => (connected = r));
const reading = (async () => {
  const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
    if (done) return;
    buf += value;
    let i: number;
    while ((i = buf.indexOf('\n\n')) !== -1) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (/^event: connected/m.test(frame)) connected();
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (!data) continue;
      try {
        const msg = JSON.parse(data) as { event?: string; data?: { id?: string } };
        if (msg.event === 'job.completed' && msg.data?.id) completed.set(msg.data.id, now());
        else if ((msg.event === 'job.failed' || msg.event === 'job.timed_out') && msg.data?.id) {
          errors++;
          firstError ??= data.slice(0, 200);
          completed.set(msg.data.id, NaN);
        }
      } catch {}
    }
  }
})();
await Promise.race([ready, Bun.sleep(10_000)]);

const sent = new Map<string, number>();
const s0 = now();
await pool(input.count, async () => {
  const t = now();
  const res = await fetch(input.graphql, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': input.apiKey },
    body: '{"query":"mutation { executeOperation(key: \\"bench\\", input: { n: 1 }) { id } }"}',
  });
  const body = (await res.json()) as { data?: { executeOperation?: { id: string } }; errors?: unknown };
  const id = body.data?.executeOperation?.id;
  if (id) sent.set(id, t);
  else {
    errors++;
    firstError ??= JSON.stringify(body).slice(0, 200);
  }
});
const end = Date.now() + 120_000;
while ([...sent.keys()].some((id) => !completed.has(id)) && Date.now() < end) await Bun.sleep(20);
abort.abort();
await reading.catch(() => {});
const received = (await (await fetch(input.endpoint)).json()) as Record<string, number>;

const done = [...sent].filter(([id]) => Number.isFinite(completed.get(id)));
const last = Math.max(...done.map(([id]) => completed.get(id)!));
const dispatch = [...sent].filter(([id]) => received[id] !== undefined).map(([id, t]) => received[id]! - t);
const e2e = done.map(([id, t]) => completed.get(id)! - t);
console.log(
  `OPSJSON ${JSON.stringify({
    direct: {
      requests: input.count,
      seconds: directSeconds,
      rps: input.count / directSeconds,
      p50: pct(direct, 50),
      p99: pct(direct, 99),
      errors: 0,
    },
    service: {
      requests: done.length,
      seconds: (last - s0) / 1000,
      rps: done.length / ((last - s0) / 1000),
      p50: pct(dispatch, 50),
      p99: pct(dispatch, 99),
      errors: errors + (sent.size - done.length),
      firstError,
    },
    e2e: { p50: pct(e2e, 50), p99: pct(e2e, 99) },
    missing: sent.size - completed.size,
  })}`,
);
process.exit(0);
