import type { Row } from './report.ts';
import type { Seeded } from './seed.ts';

/**
 * Scenario `provision` (issue 18), part one: provision PROJECTS projects into one fleet group
 * at concurrency CONCURRENCY (projects/s, p50/p99 per provision), beside a reference in the same
 * run: the same number of bare `POST /v1/control/projects` at the same concurrency (what a
 * project costs without the composed, recorded steps). Part two (bench/provision-rows.ts measures it with
 * the usual load generator): a key-only read rotating over every provisioned project against
 * the same read on one project, with the fleet schema cache's entries read from /metrics.
 */
export const PROJECTS = Number(process.env.BENCH_PROVISION_PROJECTS || 500);
const CONCURRENCY = 8;
const BENCH_RATE_LIMIT = 1_000_000_000;

export const FLEET_READ_DOC = '{ items(first: 10) { edges { node { _id title sku } } totalCount } }';

const ITEM = {
  key: 'item',
  name: 'Item',
  versioned: false,
  fields: [
    { key: 'title', type: 'text', required: true },
    { key: 'sku', type: 'text', queryable: true },
    { key: 'price', type: 'number' },
  ],
  lookups: [{ keyBy: ['sku'] }],
};

export interface FleetSetup {
  rows: Row[];
  notes: string[];
  /** One header set per provisioned project (pk_t_ read key + X-Project-Id). */
  rotation: Record<string, string>[];
}

async function control(url: string, token: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} → HTTP ${res.status} ${text.slice(0, 160)}`);
  return JSON.parse(text);
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;

/** Runs `count` calls of `one` with `concurrency` workers; requests/s and latency quantiles. */
async function drive(
  count: number,
  concurrency: number,
  one: (i: number) => Promise<void>,
): Promise<{
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  firstError?: string;
}> {
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const s = performance.now();
        try {
          await one(i);
          latencies.push(performance.now() - s);
        } catch (err) {
          errors++;
          firstError ??= (err as Error).message;
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((x, y) => x - y);
  return {
    requests: latencies.length,
    seconds,
    rps: latencies.length / seconds,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    errors,
    ...(firstError ? { firstError } : {}),
  };
}

export async function setupFleet(
  url: string,
  s: Seeded,
  rss: () => { end(): number | undefined },
): Promise<FleetSetup> {
  const notes: string[] = [];
  const group = `bench-${Date.now().toString(36)}`;
  await control(url, s.ownerKey, 'POST', `/v1/control/fleet-groups/${group}/publish`, {
    name: 'Bench storefronts',
    config: { models: [ITEM] },
  });
  const key = (type: string, scopes: string[]) =>
    control(url, s.ownerKey, 'POST', '/v1/control/api-keys', {
      name: `bench-fleet-${type}`,
      type,
      tenant: true,
      projects: [s.projectId],
      scopes,
      rateLimit: BENCH_RATE_LIMIT,
    }) as Promise<{ id: string; key: string }>;
  const prov = await key('secret', ['provision', 'records:read', 'records:write']);
  const reader = await key('public', ['records:read']);

  process.stderr.write(
    `bench: provision/projects-create (reference: ${PROJECTS} bare project creates, concurrency ${CONCURRENCY}) … `,
  );
  const ref = await drive(
    PROJECTS,
    CONCURRENCY,
    async (i) => void (await control(url, s.ownerKey, 'POST', '/v1/control/projects', { name: `bare ${i}` })),
  );
  process.stderr.write(`${ref.rps.toFixed(1)} projects/s\n`);

  process.stderr.write(`bench: provision (${PROJECTS} projects into one group, concurrency ${CONCURRENCY}) … `);
  const ids: string[] = new Array(PROJECTS);
  const window = rss();
  const run = await drive(PROJECTS, CONCURRENCY, async (i) => {
    const res = await fetch(`${url}/v1/provision`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': prov.key, 'x-project-id': s.projectId },
      body: JSON.stringify({
        provision_id: `${group}-${i}`,
        group_id: group,
        name: `Shop ${i}`,
        branding: { displayName: `Shop ${i}` },
        allow_list_key_ids: [prov.id, reader.id],
      }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await res.json()) as { project_id?: string; status?: string; message?: string };
    if (res.status !== 201 || body.status !== 'completed') throw new Error(`HTTP ${res.status} ${body.message ?? ''}`);
    ids[i] = body.project_id!;
  });
  const rssMb = window.end();
  process.stderr.write(`${run.rps.toFixed(1)} projects/s\n`);
  if (run.errors > 0) notes.push(`provision: ${run.errors} provisions failed (first: ${run.firstError})`);
  const done = ids.filter(Boolean);
  notes.push(
    `provision: ${done.length} projects provisioned into one fleet group at concurrency ${CONCURRENCY}: ${run.rps.toFixed(1)} projects/s, p50 ${run.p50.toFixed(1)} ms, p99 ${run.p99.toFixed(1)} ms = ${(run.rps / ref.rps).toFixed(2)} × bare POST /v1/control/projects (${ref.rps.toFixed(1)}/s, same concurrency, same run); each provision is 5 committed statements (the claim, then one per recorded step) after 2–3 reads, and 3–4 NOTIFYs after the commits`,
  );

  // One record per project, written with the tenant key through X-Project-Id (waits for key caches).
  const create = 'mutation($d: ItemInput!) { createItem(data: $d) { _id } }';
  await drive(done.length, CONCURRENCY, async (i) => {
    for (let attempt = 0; ; attempt++) {
      const res = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': prov.key, 'x-project-id': done[i]! },
        body: JSON.stringify({
          query: create,
          variables: { d: { title: `Item of shop ${i}`, sku: `sku-${i}`, price: i } },
        }),
      });
      const text = await res.text();
      if (res.ok && !text.includes('"errors"')) return;
      if (attempt > 50) throw new Error(text.slice(0, 120));
      await Bun.sleep(20);
    }
  });
  return {
    notes,
    rotation: done.map((id) => ({ 'x-api-key': reader.key, 'x-project-id': id })),
    rows: [
      { name: 'provision/projects-create', shape: 'provision', reference: true, result: { ...ref, rssMb: undefined } },
      { name: 'provision', shape: 'provision', reference: false, result: { ...run, rssMb } },
    ],
  };
}

/** `svc_graphql_cache_entries` by kind, from the service's /metrics. */
export async function cacheEntries(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^svc_graphql_cache_entries\{kind="([^"]+)"\} (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  const actors = /^svc_live_actors\{kind="project",state="live"\} (\S+)$/m.exec(text);
  if (actors) out['project actors live'] = Number(actors[1]);
  return out;
}
