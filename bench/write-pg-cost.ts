/**
 * PostgreSQL CPU per write statement, one backend, no service (issue 11, session 4): runs each
 * shape N times, one transaction each, on one connection and reads that backend's CPU time from
 * /proc (PostgreSQL on this machine). `bun bench/write-pg-cost.ts <database url> [n]` on a
 * migrated database it may write to (it adds a tenant and a project). Shapes: the ceiling's bare
 * jsonb INSERT, svc_write_create, svc_write_publish of a created record, and the create again with
 * one kind of index or foreign key removed at a time (inside a transaction rolled back, so the
 * database keeps its indexes).
 */
import { SQL } from 'bun';
import { readFileSync } from 'node:fs';

const url = process.argv[2] ?? process.env.DATABASE_URL!;
const N = Number(process.argv[3] ?? 2000);
const sql = new SQL({ url, max: 1 });
const [{ pid }] = await sql`select pg_backend_pid() as pid`;
const cpu = () => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, seconds (USER_HZ 100)
};
const P = `prj_cost_${Date.now()}`;
await sql.unsafe(`insert into tenants (id, name) values ('t_${P}', 'cost') on conflict do nothing; insert into projects (id, tenant_id, name) values ('${P}', 't_${P}', 'cost')`);
await sql.unsafe(`create table if not exists cost_ceiling (id bigserial primary key, data jsonb not null)`);
const data = JSON.stringify({ title: 'A note title', body: 'Some body text of a note, a few words long.', slug: 'a-note' });
let k = 0;
const id = () => `rec_cost_${Date.now().toString(36)}_${k++}`;
const create = (rid: string) => `select * from svc_write_create('${rid}', '${P}', 'note', null, true, 'key_x', 'en', '${data}'::jsonb, 'A note title Some body text')`;

async function measure(name: string, one: () => string, setup = '', teardown = ''): Promise<number> {
  if (setup) await sql.unsafe(setup);
  for (let i = 0; i < 200; i++) await sql.unsafe(`begin; ${one()}; commit`); // warm plans and caches
  const t0 = cpu();
  const w0 = performance.now();
  for (let i = 0; i < N; i++) await sql.unsafe(`begin; ${one()}; commit`);
  const us = ((cpu() - t0) * 1e6) / N;
  const wall = ((performance.now() - w0) * 1e3) / N;
  if (teardown) await sql.unsafe(teardown);
  console.log(`${name.padEnd(48)} ${us.toFixed(0).padStart(5)} µs CPU  ${wall.toFixed(0).padStart(5)} µs wall per transaction`);
  return us;
}

await measure('bare jsonb INSERT (write-ceiling)', () => `insert into cost_ceiling (data) values ('${data}'::jsonb)`);
await measure('svc_write_create', () => create(id()));
const toPublish: string[] = [];
for (let i = 0; i < N + 200; i++) {
  const r = id();
  toPublish.push(r);
  await sql.unsafe(create(r));
}
await measure('svc_write_publish', () => `select * from svc_write_publish('${toPublish.pop()}', '${P}', 'note', 'key_x', '{}'::text[], 'nf', 'en', 'en')`);
await measure('svc_write_create + outbox row', () => `${create(id())}; insert into bus_notify_outbox (payload) values ('{"origin":"x","events":[]}')`);
await measure('svc_write_create + pg_notify', () => `${create(id())}; select pg_notify('cost_x', 'p')`);
// One index or key at a time, dropped for the measurement and put back.
const drops: [string, string, string][] = [
  ['without GIN record_content_data', 'drop index record_content_data', 'create index record_content_data on record_content using gin (data jsonb_path_ops)'],
  ['without GIN record_content_search', 'drop index record_content_search', 'create index record_content_search on record_content using gin (search)'],
  ['without record_content_scan', 'drop index record_content_scan', 'create index record_content_scan on record_content (project_id, model_key, stage, locale, record_id)'],
  ['without records_model', 'drop index records_model', 'create index records_model on records (project_id, model_key, created_at, id)'],
  ['without FK records → projects', 'alter table records drop constraint records_project_id_fkey', 'alter table records add constraint records_project_id_fkey foreign key (project_id) references projects(id) on delete cascade'],
  ['without FK record_content → records', 'alter table record_content drop constraint record_content_record_id_fkey', 'alter table record_content add constraint record_content_record_id_fkey foreign key (record_id) references records(id) on delete cascade'],
];
for (const [name, setup, teardown] of drops) await measure(`svc_write_create ${name}`, () => create(id()), setup, teardown);
await sql.unsafe(`delete from records where project_id = '${P}'; delete from projects where id = '${P}'; delete from tenants where id = 't_${P}'; drop table cost_ceiling`);
await sql.close();
