/**
 * `bun bench/fleet-memory.ts [count]` (issue 18, "measure it"): the heap a project costs once it
 * has served a read, for COUNT fleet members on one group version against COUNT standalone
 * projects with the same models (the peer: one generated schema per project). In-process, on a
 * fresh database of the suite's server (DATABASE_URL), so the heap is this process' alone.
 * Prints one line `MEMJSON {…}` and a human summary.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { randomBytes } from 'node:crypto';
import { readSettings } from '../src/env.ts';
import { openService } from '../src/service.ts';
import { execute } from '../src/graphql/execute.ts';
import { sharedSchemaCount } from '../src/graphql/schema-entries.ts';
import { fingerprintOf } from '../src/auth/resolve.ts';
import type { KeyPrincipal } from '../src/auth/principal.ts';
import type { Sql } from '../src/store/db.ts';

const COUNT = Number(process.argv[2] || process.env.BENCH_FLEET_PROJECTS || 1000);
const base = process.env.DATABASE_URL;
if (!base) throw new Error('DATABASE_URL must name a PostgreSQL server (a fresh database is created on it)');

const field = (key: string, type: string, extra: Record<string, unknown> = {}) => ({ key, type, label: key, ...extra });
/** A storefront-sized schema: 6 models, 40 fields, lookups and references. */
const MODELS = [
  {
    key: 'product',
    name: 'Product',
    fields: [
      field('title', 'text', { required: true }),
      field('sku', 'text', { queryable: true }),
      field('price', 'number', { queryable: true }),
      field('description', 'richtext'),
      field('images', 'list', { itemType: 'image' }),
      field('category', 'reference', { config: { modelKey: 'category' } }),
      field('inStock', 'boolean', { queryable: true }),
      field('tags', 'list', { itemType: 'text' }),
    ],
    lookups: [{ keyBy: ['sku'] }],
  },
  {
    key: 'category',
    name: 'Category',
    fields: [
      field('name', 'text', { required: true }),
      field('slug', 'text', { queryable: true }),
      field('parent', 'reference', { config: { modelKey: 'category' } }),
      field('position', 'number'),
    ],
    lookups: [{ keyBy: ['slug'] }],
  },
  {
    key: 'page',
    name: 'Page',
    fields: [
      field('title', 'text'),
      field('slug', 'text', { queryable: true }),
      field('body', 'richtext'),
      field('seoTitle', 'text'),
      field('seoDescription', 'text'),
      field('publishedOn', 'date', { queryable: true }),
    ],
    lookups: [{ keyBy: ['slug'] }],
  },
  {
    key: 'banner',
    name: 'Banner',
    versioned: false,
    fields: [
      field('headline', 'text'),
      field('image', 'image'),
      field('link', 'text'),
      field('active', 'boolean', { queryable: true }),
      field('position', 'number'),
    ],
  },
  {
    key: 'faq',
    name: 'FAQ',
    fields: [
      field('question', 'text'),
      field('answer', 'richtext'),
      field('topic', 'enum', {
        config: {
          options: [
            { value: 'shipping', label: 'Shipping' },
            { value: 'returns', label: 'Returns' },
          ],
        },
      }),
      field('position', 'number'),
    ],
  },
  {
    key: 'store',
    name: 'Store',
    versioned: false,
    fields: [
      field('name', 'text'),
      field('address', 'text'),
      field('city', 'text', { queryable: true }),
      field('phone', 'text'),
      field('opening', 'json'),
      field('lat', 'number'),
      field('lng', 'number'),
      field('manager', 'text'),
      field('email', 'text'),
      field('open', 'boolean'),
    ],
  },
];
const QUERY =
  '{ products(first: 10) { edges { node { _id title sku price } } totalCount } pages(first: 5) { edges { node { title slug } } } }';

const name = `svc_fleetmem_${randomBytes(4).toString('hex')}`;
const admin = postgres(base, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database "${name}"`);
const url = new URL(base);
url.pathname = `/${name}`;
const settings = readSettings({
  DATABASE_URL: url.toString(),
  PORT: '0',
  REALTIME_PORT: '0',
  SVC_LOG: 'off',
  SVC_DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-fleetmem-')),
  SVC_ROOT_TOKEN: `rt_${randomBytes(8).toString('hex')}`,
});
const svc = await openService(settings);
try {
  const sql: Sql = svc.sql;
  const tenant = 'ten_fleetmem';
  await sql`insert into tenants (id, name) values (${tenant}, 'fleet memory')`;
  await sql`insert into fleet_groups (id, tenant_id, key, name, schema_version) values ('fg_mem', ${tenant}, 'mem', 'mem', 1)`;
  await sql`insert into fleet_group_versions (group_id, version, schema) values ('fg_mem', 1, ${sql.json({ models: MODELS } as never)})`;
  const members = Array.from({ length: COUNT }, (_, i) => `prj_member_${i}`);
  const alone = Array.from({ length: COUNT }, (_, i) => `prj_alone_${i}`);
  await sql`insert into projects (id, tenant_id, name, fleet_group_id, fleet_schema_version, schema_version)
            select id, ${tenant}, id, 'fg_mem', 1, 1 from unnest(${members}::text[]) as id`;
  await sql`insert into projects (id, tenant_id, name, schema_version) select id, ${tenant}, id, 1 from unnest(${alone}::text[]) as id`;
  for (const [i, m] of MODELS.entries()) {
    await sql`insert into models (project_id, key, position, definition) select id, ${m.key}, ${i}, ${sql.json(m as never)} from unnest(${alone}::text[]) as id`;
  }
  const scopes = new Set(['records:read']) as ReadonlySet<string>;
  const principal = (projectId: string): KeyPrincipal => ({
    keyId: 'key_mem',
    kind: 'pk_t',
    tenantId: tenant,
    projectId,
    scopes,
    allowedModels: null,
    allowedFileTypes: null,
    fingerprint: fingerprintOf({ kind: 'pk_t', scopes, allowedModels: null }),
  });
  const heap = () => {
    Bun.gc(true);
    return process.memoryUsage().heapUsed;
  };
  const serve = async (ids: string[]) => {
    for (const id of ids) {
      const r = await execute(svc, principal(id), { query: QUERY }, { method: 'POST', customer: null });
      if (r.result.errors?.length) throw new Error(`${id}: ${r.result.errors[0]!.message}`);
    }
  };
  // Warm the code paths (JIT, module state) on projects outside both measured sets.
  await serve([members[0]!, alone[0]!]);
  const h0 = heap();
  await serve(members.slice(1));
  const h1 = heap();
  const shared = sharedSchemaCount();
  await serve(alone.slice(1));
  const h2 = heap();
  const n = COUNT - 1;
  const out = {
    projects: n,
    memberBytesPerProject: Math.round((h1 - h0) / n),
    standaloneBytesPerProject: Math.round((h2 - h1) / n),
    memberTotalMb: (h1 - h0) / 1048576,
    standaloneTotalMb: (h2 - h1) / 1048576,
    sharedSchemas: shared,
    rssMb: process.memoryUsage().rss / 1048576,
  };
  console.log(`MEMJSON ${JSON.stringify(out)}`);
  console.log(
    `${n} fleet members on one version: +${out.memberTotalMb.toFixed(1)} MB heap (${(out.memberBytesPerProject / 1024).toFixed(1)} KB per project; ${shared} shared generated schema for all of them); ` +
      `${n} standalone projects with the same models: +${out.standaloneTotalMb.toFixed(1)} MB (${(out.standaloneBytesPerProject / 1024).toFixed(1)} KB per project) = ${(out.standaloneBytesPerProject / Math.max(1, out.memberBytesPerProject)).toFixed(1)} × the member cost`,
  );
} finally {
  await svc.close();
  await admin.unsafe(`drop database if exists "${name}" with (force)`).catch(() => {});
  await admin.end();
}
