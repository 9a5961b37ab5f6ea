import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/main.ts';
import { COMMANDS } from '../src/cli/commands/index.ts';
import { connect } from '../src/store/db.ts';
import { insertApiKey } from '../src/auth/api-keys.ts';
import { replaceModels, announceSchema } from '../src/projects/store.ts';
import { EventBus } from '../src/bus/bus.ts';
import type { ModelDef } from '../src/projects/types.ts';
import { articleRow, listingRow, READ_RECORDS, FILTERED_RECORDS } from './data.ts';

/**
 * Seeds the service under test through its public surfaces: tenant and project with the CLI
 * (in-process `runCli`); models with `svc push` of a config folder written to a temp dir
 * (falling back, while `svc push` has not landed, to `replaceModels` + `announceSchema` over a
 * direct connection); keys with `svc api-keys create` (else `insertApiKey`), each with a rate
 * limit far above any bench run; records with GraphQL create + publish mutations.
 */
export interface Seeded {
  tenantId: string;
  projectId: string;
  ownerKey: string;
  secretKey: string;
  publicKey: string;
  configDir: string;
  notes: string[];
}

const BENCH_RATE_LIMIT = 1_000_000_000;

const text = (key: string, queryable = false) => ({
  key,
  type: 'text' as const,
  label: key,
  ...(queryable ? { queryable } : {}),
});
const num = (key: string, queryable = false) => ({
  key,
  type: 'number' as const,
  label: key,
  ...(queryable ? { queryable } : {}),
});
const bool = (key: string) => ({ key, type: 'boolean' as const, label: key });

export const MODELS: ModelDef[] = [
  {
    key: 'article',
    name: 'Article',
    fields: [text('title'), text('slug'), text('summary'), num('rating'), bool('featured')],
  },
  {
    key: 'listing',
    name: 'Listing',
    fields: [text('title'), text('category', true), num('rank', true), text('summary'), bool('featured')],
  },
  {
    key: 'note',
    name: 'Note',
    fields: [text('title'), text('slug'), text('summary'), num('rating'), bool('featured')],
  },
  // collab: an unversioned model, so room edits are autosaved into the record.
  { key: 'pad', name: 'Pad', versioned: false, fields: [text('title'), text('body')] },
];

function has(...path: string[]): boolean {
  return COMMANDS.some((c) => c.path.join(' ') === path.join(' '));
}

async function cli(apiUrl: string, token: string, argv: string[]): Promise<Record<string, unknown>> {
  let out = '';
  let err = '';
  const code = await runCli(
    [...argv, '--json'],
    { out: (s) => (out += s), err: (s) => (err += s) },
    { SVC_URL: apiUrl, SVC_TOKEN: token },
  );
  if (code !== 0) throw new Error(`svc ${argv.slice(0, 2).join(' ')}: ${err.trim() || out.trim()}`);
  return JSON.parse(out) as Record<string, unknown>;
}

export async function seedProject(apiUrl: string, rootToken: string, databaseUrl: string): Promise<Seeded> {
  const notes: string[] = [];
  const t = await cli(apiUrl, rootToken, ['tenants', 'create', '--name', 'bench']);
  const tenantId = t.tenantId as string;
  const ownerKey = t.controlKey as string;
  const p = await cli(apiUrl, ownerKey, ['projects', 'create', '--name', 'bench']);
  const projectId = p.projectId as string;
  const configDir = mkdtempSync(join(tmpdir(), 'svc-bench-config-'));
  const config = {
    key: 'bench',
    name: 'bench',
    project: { id: projectId, tenantId },
    models: MODELS,
  };
  writeFileSync(join(configDir, 'svc.config.json'), JSON.stringify(config, null, 2));
  let pushed = false;
  if (has('push')) {
    try {
      await cli(apiUrl, ownerKey, ['push', '--dir', configDir]);
      pushed = true;
    } catch (err) {
      notes.push(`svc push failed (${(err as Error).message.split('\n')[0]}); models stored with replaceModels`);
    }
  } else {
    notes.push('svc push not available yet: models stored with replaceModels over a direct connection');
  }
  // The config folder is only for the push: each bench run left one behind in the temp dir.
  rmSync(configDir, { recursive: true, force: true });
  // Keys with a rate limit far above any bench run (the default is 10,000 requests per hour).
  const key = async (type: 'secret' | 'public', scopes: string): Promise<string | undefined> => {
    if (!has('api-keys', 'create')) return undefined;
    try {
      const r = await cli(apiUrl, ownerKey, [
        'api-keys',
        'create',
        '--project',
        projectId,
        '--name',
        `bench-${type}`,
        '--type',
        type,
        '--scopes',
        scopes,
        '--rate-limit',
        String(BENCH_RATE_LIMIT),
      ]);
      return r.key as string;
    } catch (err) {
      notes.push(
        `svc api-keys create failed (${(err as Error).message.split('\n')[0]}); key written with insertApiKey`,
      );
      return undefined;
    }
  };
  let secretKey = await key('secret', '*');
  let publicKey = await key('public', 'records:read');
  if (!pushed || !secretKey || !publicKey) {
    // Fallback while `svc push` / `svc api-keys create` are not available: the rows they would write.
    const sql = connect(databaseUrl, { max: 2 });
    try {
      if (!pushed) {
        const version = await sql.begin((tx) => replaceModels(tx as never, projectId, MODELS));
        if (version !== null) {
          const bus = new EventBus();
          await bus.attach(sql);
          await announceSchema(bus, projectId, version);
          await bus.detach();
        }
      }
      const insert = async (kind: 'sk' | 'pk', scopes: string[]) =>
        (
          await insertApiKey(sql, {
            tenantId,
            projectId,
            kind,
            name: `bench-${kind}`,
            scopes,
            rateLimit: BENCH_RATE_LIMIT,
          })
        ).key;
      secretKey ??= await insert('sk', ['*']);
      publicKey ??= await insert('pk', ['records:read']);
    } finally {
      await sql.end({ timeout: 2 });
    }
  }
  return { tenantId, projectId, ownerKey, secretKey, publicKey, configDir, notes };
}

/** `count` public read keys for auth-mixed: `svc api-keys create` when present, else insertApiKey. */
export async function rotationKeys(apiUrl: string, databaseUrl: string, s: Seeded, count: number): Promise<string[]> {
  const keys: string[] = [];
  if (has('api-keys', 'create')) {
    try {
      for (let i = 0; i < count; i += 16) {
        const batch = Array.from({ length: Math.min(16, count - i) }, (_, j) =>
          cli(apiUrl, s.ownerKey, [
            'api-keys',
            'create',
            '--project',
            s.projectId,
            '--name',
            `rot-${i + j}`,
            '--type',
            'public',
            '--scopes',
            'records:read',
            '--rate-limit',
            String(BENCH_RATE_LIMIT),
          ]),
        );
        for (const r of await Promise.all(batch)) keys.push(r.key as string);
      }
      if (keys.every((k) => typeof k === 'string')) return keys;
    } catch (err) {
      s.notes.push(
        `svc api-keys create failed (${(err as Error).message.split('\n')[0]}); rotation keys written with insertApiKey`,
      );
    }
    keys.length = 0;
  }
  const sql = connect(databaseUrl, { max: 4 });
  try {
    for (let i = 0; i < count; i++) {
      keys.push(
        (
          await insertApiKey(sql, {
            tenantId: s.tenantId,
            projectId: s.projectId,
            kind: 'pk',
            name: `rot-${i}`,
            scopes: ['records:read'],
            rateLimit: BENCH_RATE_LIMIT,
          })
        ).key,
      );
    }
  } finally {
    await sql.end({ timeout: 2 });
  }
  return keys;
}

/** POSTs one GraphQL document; throws one line on HTTP or GraphQL errors. */
export async function gql(
  url: string,
  key: string,
  query: string,
  variables?: Record<string, unknown>,
): Promise<{ text: string; data: any }> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query, variables }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status === 404) throw new Error(`POST /graphql → 404 (content API not available)`);
  let body: { data?: unknown; errors?: { message: string }[] };
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`POST /graphql → ${res.status}: ${text.slice(0, 120)}`);
  }
  if (body.errors?.length) throw new Error(`GraphQL: ${body.errors[0]!.message.slice(0, 160)}`);
  if (res.status !== 200) throw new Error(`POST /graphql → ${res.status}`);
  return { text, data: body.data };
}

const pascal = (k: string) => k[0]!.toUpperCase() + k.slice(1);

async function createPublished(
  url: string,
  key: string,
  model: string,
  nk: string,
  data: Record<string, unknown>,
): Promise<void> {
  const M = pascal(model);
  const c = await gql(
    url,
    key,
    `mutation($nk: String, $d: ${M}Input!) { create${M}(naturalKey: $nk, data: $d) { _id } }`,
    { nk, d: data },
  );
  const id = c.data[`create${M}`]._id as string;
  await gql(url, key, `mutation($id: ID!) { publish${M}Version(_id: $id) { _id } }`, { id });
}

async function pool(total: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) await job(next++);
    }),
  );
}

export async function seedArticles(url: string, s: Seeded): Promise<void> {
  await pool(READ_RECORDS, 4, async (i) => {
    const { id, ...data } = articleRow(i + 1);
    await createPublished(url, s.secretKey, 'article', id, data);
  });
}

/**
 * The 10,000 listings of read-filtered, through GraphQL create + publish with 16 in flight
 * (the public surface; on this machine it takes seconds, not minutes). Bounded by `deadlineMs`.
 */
export async function seedListings(url: string, s: Seeded, deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  await pool(FILTERED_RECORDS, 16, async (i) => {
    if (Date.now() > until)
      throw new Error(`seeding ${FILTERED_RECORDS} listings took longer than ${deadlineMs / 1000} s`);
    const { id, ...data } = listingRow(i + 1);
    await createPublished(url, s.secretKey, 'listing', id, data);
  });
}
