/**
 * PostgreSQL CPU per write statement, one backend, no service (issue 11, sessions 4 and 5): runs
 * each shape on one connection and reads that backend's CPU time from /proc (PostgreSQL on this
 * machine; `schedstat`, nanoseconds, where the kernel has it). `bun bench/write-pg-cost.ts
 * <database url> [n] [rounds]` on a migrated database it may write to (it adds a tenant and a
 * project).
 *
 * 1. One write per transaction, n transactions per shape: the ceiling's bare jsonb INSERT,
 *    svc_write_create, svc_write_publish, the create with an outbox row or a pg_notify, and the
 *    create again with one index or foreign key removed at a time (dropped for the measurement and
 *    put back; a key the schema no longer has is skipped).
 * 2. Per write in groups of 8 per transaction, as `WriteCommitter` sends concurrent mutations:
 *    create, publish, update and unpublish, each sent the way main sent them until session 5 (the
 *    call's text with its parameters inlined) and as EXECUTE of a prepared call (src/content/tx.ts
 *    since session 5). `rounds` rounds of n/8 transactions per shape, the shapes alternating; the
 *    median of the rounds is printed with their range. The statements are the ones
 *    src/content/write.ts sends, so this runs against any migrated database, before or after a
 *    change to the write functions.
 */
import { SQL } from 'bun';
import { existsSync, readFileSync } from 'node:fs';

const url = process.argv[2] ?? process.env.DATABASE_URL!;
const N = Number(process.argv[3] ?? 2000);
const ROUNDS = Number(process.argv[4] ?? 7);
const G = 8;
const sql = new SQL({ url, max: 1 });
const [{ pid }] = await sql`select pg_backend_pid() as pid`;
const schedstat = `/proc/${pid}/schedstat`;
/** The backend's CPU time so far, µs. */
const cpu = existsSync(schedstat)
  ? () => Number(readFileSync(schedstat, 'utf8').split(' ')[0]) / 1e3
  : () => {
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return ((Number(f[11]) + Number(f[12])) / 100) * 1e6; // utime + stime (USER_HZ 100)
    };
const P = `prj_cost_${Date.now()}`;
await sql.unsafe(
  `insert into tenants (id, name) values ('t_${P}', 'cost') on conflict do nothing; insert into projects (id, tenant_id, name) values ('${P}', 't_${P}', 'cost')`,
);
await sql.unsafe(`create table if not exists cost_ceiling (id bigserial primary key, data jsonb not null)`);
const data = JSON.stringify({
  title: 'A note title',
  body: 'Some body text of a note, a few words long.',
  slug: 'a-note',
});
const patch = JSON.stringify({ title: 'Another title' });
let k = 0;
const id = () => `rec_cost_${Date.now().toString(36)}_${k++}`;
const create = (rid: string) =>
  `select * from svc_write_create('${rid}', '${P}', 'note', null, true, 'key_x', 'en', '${data}'::jsonb, 'A note title Some body text')`;

async function measure(name: string, one: () => string, setup = '', teardown = ''): Promise<number> {
  if (setup) await sql.unsafe(setup);
  for (let i = 0; i < 200; i++) await sql.unsafe(`begin; ${one()}; commit`); // warm plans and caches
  const t0 = cpu();
  const w0 = performance.now();
  for (let i = 0; i < N; i++) await sql.unsafe(`begin; ${one()}; commit`);
  const us = (cpu() - t0) / N;
  const wall = ((performance.now() - w0) * 1e3) / N;
  if (teardown) await sql.unsafe(teardown);
  console.log(
    `${name.padEnd(52)} ${us.toFixed(0).padStart(5)} µs CPU  ${wall.toFixed(0).padStart(5)} µs wall per transaction`,
  );
  return us;
}

/** Records made with svc_write_create, for the shapes that write existing records. */
const made: string[] = [];
async function make(n: number): Promise<void> {
  const ids = Array.from({ length: n }, id);
  for (let i = 0; i < ids.length; i += 200)
    await sql.unsafe(
      `begin; ${ids
        .slice(i, i + 200)
        .map(create)
        .join('; ')}; commit`,
    );
  made.push(...ids);
}

console.log(`1. one write per transaction, ${N} transactions each`);
await measure('bare jsonb INSERT (write-ceiling)', () => `insert into cost_ceiling (data) values ('${data}'::jsonb)`);
await measure('svc_write_create', () => create(id()));
await make(N + 200);
await measure(
  'svc_write_publish',
  () => `select * from svc_write_publish('${made.pop()}', '${P}', 'note', 'key_x', '{}'::text[], 'nf', 'en', 'en')`,
);
await measure(
  'svc_write_create + outbox row',
  () => `${create(id())}; insert into bus_notify_outbox (payload) values ('{"origin":"x","events":[]}')`,
);
await measure('svc_write_create + pg_notify', () => `${create(id())}; select pg_notify('cost_x', 'p')`);
// One index or key at a time, dropped for the measurement and put back.
const drops: [string, string, string, string][] = [
  [
    'without GIN record_content_data',
    'record_content_data',
    'drop index record_content_data',
    'create index record_content_data on record_content using gin (data jsonb_path_ops)',
  ],
  [
    'without GIN record_content_search',
    'record_content_search',
    'drop index record_content_search',
    'create index record_content_search on record_content using gin (search)',
  ],
  [
    'without record_content_scan',
    'record_content_scan',
    'drop index record_content_scan',
    'create index record_content_scan on record_content (project_id, model_key, stage, locale, record_id)',
  ],
  [
    'without records_model',
    'records_model',
    'drop index records_model',
    'create index records_model on records (project_id, model_key, created_at, id)',
  ],
  [
    'without FK records → projects',
    'records_project_id_fkey',
    'alter table records drop constraint records_project_id_fkey',
    'alter table records add constraint records_project_id_fkey foreign key (project_id) references projects(id) on delete cascade',
  ],
  [
    'without FK record_content → records',
    'record_content_record_id_fkey',
    'alter table record_content drop constraint record_content_record_id_fkey',
    'alter table record_content add constraint record_content_record_id_fkey foreign key (record_id) references records(id) on delete cascade',
  ],
];
for (const [name, object, setup, teardown] of drops) {
  const [{ n }] =
    await sql`select (select count(*) from pg_class where relname = ${object}) + (select count(*) from pg_constraint where conname = ${object}) as n`;
  if (Number(n) === 0) console.log(`svc_write_create ${name}`.padEnd(53) + '(not in this schema)');
  else await measure(`svc_write_create ${name}`, () => create(id()), setup, teardown);
}

// 2. Per write, 8 writes per transaction, as text (inlined, as main sent them) and as EXECUTE.
const calls = {
  create: {
    text: `select * from svc_write_create($1::text, $2::text, $3::text, $4::text, $5::boolean, $6::text, $7::text, $8::text::jsonb, $9::text)`,
    args: () => [
      `'${id()}'`,
      `'${P}'`,
      `'note'`,
      'null',
      'true',
      `'key_x'`,
      `'en'`,
      `'${data}'`,
      `'A note title Some body text'`,
    ],
  },
  publish: {
    text: `select * from svc_write_publish($1::text, $2::text, $3::text, $4::text, $5::text[], $6::text, $7::text, $8::text)`,
    args: () => [`'${made.pop()}'`, `'${P}'`, `'note'`, `'key_x'`, `'{}'`, `'nf'`, `'en'`, `'en'`],
  },
  update: {
    text: `select * from svc_write_update($1::text, $2::text, $3::text, $4::text, $5::text, $6::text::jsonb, $7::text[], $8::text[], $9::boolean, $10::text, $11::text)`,
    args: () => [
      `'${made.pop()}'`,
      `'${P}'`,
      `'note'`,
      `'en'`,
      `'en'`,
      `'${patch}'`,
      `'{}'`,
      `array['title','body']`,
      'true',
      `'key_x'`,
      `'nf'`,
    ],
  },
  unpublish: {
    text: `select * from svc_write_unpublish($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text)`,
    args: () => [`'${made.pop()}'`, `'${P}'`, `'note'`, `'key_x'`, `'nf'`, `'en'`, `'en'`],
  },
};
type Kind = keyof typeof calls;
const inlined = (kind: Kind) => {
  const a = calls[kind].args();
  return calls[kind].text.replace(/\$(\d+)/g, (_, n: string) => a[Number(n) - 1]!);
};
for (const kind of Object.keys(calls) as Kind[]) await sql.unsafe(`prepare cost_${kind} as ${calls[kind].text}`);
const shapes: [string, () => string][] = [];
for (const kind of Object.keys(calls) as Kind[]) {
  shapes.push([`${kind}, text`, () => inlined(kind)]);
  shapes.push([`${kind}, EXECUTE`, () => `execute cost_${kind}(${calls[kind].args().join(', ')})`]);
}
const M = Math.max(10, Math.round(N / 20));
const group = (one: () => string) => `begin; ${Array.from({ length: G }, one).join('; ')}; commit`;
const results = new Map<string, number[]>();
await make(shapes.length * (ROUNDS + 1) * M * G);
for (const [, one] of shapes) for (let i = 0; i < 10; i++) await sql.unsafe(group(one)); // warm, past the plan cache's custom plans
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, one] of shapes) {
    const texts = Array.from({ length: M }, () => group(one));
    const t0 = cpu();
    for (const t of texts) await sql.unsafe(t);
    results.set(name, [...(results.get(name) ?? []), (cpu() - t0) / (M * G)]);
  }
}
console.log(
  `2. per write, ${G} writes per transaction, ${ROUNDS} rounds of ${M} transactions: median (range) µs CPU per write`,
);
for (const [name, v] of results) {
  const s = [...v].sort((a, b) => a - b);
  console.log(
    `${name.padEnd(52)} ${s[s.length >> 1]!.toFixed(1).padStart(6)} (${s[0]!.toFixed(1)}–${s[s.length - 1]!.toFixed(1)})`,
  );
}
await sql.unsafe(
  `delete from records where project_id = '${P}'; delete from projects where id = '${P}'; delete from tenants where id = 't_${P}'; drop table cost_ceiling`,
);
await sql.close();
