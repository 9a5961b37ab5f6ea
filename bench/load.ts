/**
 * The harness's own load generator, run as a separate process (`bun bench/load.ts plan.json`)
 * so the server under test never shares an event loop with it. N concurrent keep-alive fetch
 * loops for a fixed duration; every latency is kept and sorted at the end (a run is at most a
 * few hundred thousand samples). Prints one line: `LOADJSON {...}`.
 *
 * Plan modes:
 * - `request`: POST `body` to `url`, rotating through `headerSets` (auth-mixed passes 1,000 keys).
 * - `write`: one operation = `createNote` then `publishNoteVersion` of the created record.
 * - `create`: one operation = one `createNote`.
 * - `batch100`: one operation = one `batchRecordOperations` of 100 `createNote`s.
 * - `peer-write`, `peer-create`: the same as `write` and `create` against the PostGraphile peer
 *   (bench/references/postgraphile.mjs over `bench_ref.note`): `createNote`, then the "publish" a
 *   PostGraphile user writes — `updateNoteByRowId` setting `publishedAt`. Each its own commit.
 */
import { readFileSync } from 'node:fs';

export interface LoadPlan {
  url: string;
  mode: 'request' | 'write' | 'create' | 'batch100' | 'peer-write' | 'peer-create';
  body?: string;
  headerSets: Record<string, string>[];
  connections: number;
  warmupMs: number;
  durationMs: number;
}

/**
 * Counting (issue 28): `requests`, `rps` and the latencies cover successful operations only — an
 * HTTP status other than 200, a GraphQL `errors` entry, a network error or a timeout
 * (`REQUEST_TIMEOUT_MS`) is an error, counted in `errors` and never as throughput.
 */
export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  firstError?: string;
  /** How long the warm-up actually ran (until the rate was steady, `steadyWarmup`). */
  warmupMs?: number;
  /** wrk only: its percentiles include the failed requests' latencies (it cannot separate them). */
  latencyIncludesErrors?: boolean;
}

/** A request that has not answered after this long is an error (and its loop moves on). */
export const REQUEST_TIMEOUT_MS = Number(process.env.BENCH_REQUEST_TIMEOUT_MS || 10_000);

const CREATE = 'mutation($nk: String, $d: NoteInput!) { createNote(naturalKey: $nk, data: $d) { _id } }';
const BATCH = 'mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }';
const PUBLISH = 'mutation($id: ID!) { publishNoteVersion(_id: $id) { _id } }';
const PEER_CREATE = 'mutation($n: NoteInput!) { createNote(input: { note: $n }) { note { rowId } } }';
const PEER_PUBLISH =
  'mutation($id: UUID!, $at: Datetime!) { updateNoteByRowId(input: { rowId: $id, notePatch: { publishedAt: $at } }) { note { rowId } } }';

async function post(
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ ok: boolean; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    keepalive: true,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await res.text();
  return { ok: res.status === 200 && !text.includes('"errors"'), text };
}

export async function runPlan(plan: LoadPlan): Promise<LoadResult> {
  const lat: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let counter = 0;
  let measuring = false;
  let stop = false;
  const fail = (text: string): false => {
    if (measuring) {
      errors++;
      firstError ??= text.slice(0, 300);
    }
    return false;
  };
  /** One operation; true only when every request of it succeeded. */
  const one = async (): Promise<boolean> => {
    const n = counter++;
    const headers = plan.headerSets[n % plan.headerSets.length]!;
    if (plan.mode === 'request') {
      const r = await post(plan.url, headers, plan.body!);
      return r.ok || fail(r.text);
    }
    const nk = `w-${process.pid}-${n}`;
    const data = {
      title: `Written ${n}`,
      slug: nk,
      summary: 'written by the bench',
      rating: n % 100,
      featured: n % 2 === 0,
    };
    if (plan.mode === 'batch100') {
      const ops = Array.from({ length: 100 }, (_, i) => ({
        action: 'CREATE',
        modelKey: 'note',
        data: { ...data, slug: `${nk}-${i}` },
      }));
      const b = await post(plan.url, headers, JSON.stringify({ query: BATCH, variables: { ops } }));
      return b.ok || fail(b.text);
    }
    if (plan.mode === 'peer-write' || plan.mode === 'peer-create') {
      const c = await post(plan.url, headers, JSON.stringify({ query: PEER_CREATE, variables: { n: data } }));
      const id = c.ok
        ? (JSON.parse(c.text) as { data?: { createNote?: { note?: { rowId?: string } } } }).data?.createNote?.note
            ?.rowId
        : undefined;
      if (!id) return fail(c.text);
      if (plan.mode === 'peer-create') return true;
      const p = await post(
        plan.url,
        headers,
        JSON.stringify({ query: PEER_PUBLISH, variables: { id, at: new Date().toISOString() } }),
      );
      return p.ok || fail(p.text);
    }
    const c = await post(plan.url, headers, JSON.stringify({ query: CREATE, variables: { nk, d: data } }));
    const id = c.ok
      ? (JSON.parse(c.text) as { data?: { createNote?: { _id?: string } } }).data?.createNote?._id
      : undefined;
    if (!id) return fail(c.text);
    if (plan.mode === 'create') return true;
    const p = await post(plan.url, headers, JSON.stringify({ query: PUBLISH, variables: { id } }));
    return p.ok || fail(p.text);
  };
  const loop = async () => {
    while (!stop) {
      const t0 = performance.now();
      let ok = false;
      try {
        ok = await one();
      } catch (err) {
        fail((err as Error).message);
      }
      // A failed operation is never throughput, and its (often fast) latency is not a sample.
      if (measuring && ok) lat.push(performance.now() - t0);
    }
  };
  const loops = Array.from({ length: plan.connections }, loop);
  const warmupMs = await steadyWarmup(plan.warmupMs, () => counter);
  measuring = true;
  const t0 = performance.now();
  await Bun.sleep(plan.durationMs);
  measuring = false;
  const seconds = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all(loops);
  lat.sort((a, b) => a - b);
  const pct = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))]! : 0);
  return {
    requests: lat.length,
    seconds,
    rps: lat.length / seconds,
    p50: pct(50),
    p99: pct(99),
    errors,
    firstError,
    warmupMs: Math.round(warmupMs),
  };
}

/** Warm-up windows: the rate counts as steady when three successive windows agree within this share. */
const WINDOW_MS = 500;
const STEADY = 0.1;

/**
 * Warms the target until its rate is steady (issue 28, item 6): at least `minMs`, then until the
 * operations started in each of three successive 500 ms windows agree within 10 % (the JIT has
 * compiled the hot path, caches are full), at most 2 × `minMs` + 3 s on a box too noisy to
 * settle. Returns how long it ran; the result records it.
 */
export async function steadyWarmup(minMs: number, started: () => number): Promise<number> {
  if (minMs <= 0) return 0;
  const t0 = performance.now();
  const maxMs = minMs * 2 + 3_000;
  const rates: number[] = [];
  let last = started();
  while (true) {
    await Bun.sleep(WINDOW_MS);
    const now = started();
    rates.push(now - last);
    last = now;
    const spent = performance.now() - t0;
    const w = rates.slice(-3);
    const steady = w.length === 3 && Math.max(...w) > 0 && (Math.max(...w) - Math.min(...w)) / Math.max(...w) <= STEADY;
    if ((spent >= minMs && steady) || spent >= maxMs) return spent;
  }
}

if (import.meta.main) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: bun bench/load.ts <plan.json>');
    process.exit(2);
  }
  const plan = JSON.parse(readFileSync(file, 'utf8')) as LoadPlan;
  const result = await runPlan(plan);
  console.log(`LOADJSON ${JSON.stringify(result)}`);
  process.exit(0);
}
