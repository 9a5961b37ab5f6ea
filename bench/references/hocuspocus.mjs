/**
 * The collaboration peer (issue 28): Hocuspocus, the production Yjs server, set up as its docs
 * recommend for production — `@hocuspocus/server` with `@hocuspocus/extension-database` persisting
 * each document to the same PostgreSQL (table bench_ref.hocuspocus_document, postgres.js), its
 * default store debounce (2 s, at most 10 s), and an `onAuthenticate` hook checking the token every
 * editor sends (the service checks a key on every collaboration socket too). Runs on Node 22 from
 * bench/.peers. Env: PORT, BENCH_DATABASE_URL, BENCH_TOKEN. Prints `STORES n` on SIGUSR2.
 */
import { Server } from '@hocuspocus/server';
import { Database } from '@hocuspocus/extension-database';
import postgres from 'postgres';

const sql = postgres(process.env.BENCH_DATABASE_URL, { max: 10, onnotice: () => {} });
await sql`create schema if not exists bench_ref`;
await sql`create table if not exists bench_ref.hocuspocus_document (name text primary key, data bytea not null, updated_at timestamptz not null default now())`;
const token = process.env.BENCH_TOKEN;
let stores = 0;

const server = new Server({
  port: Number(process.env.PORT),
  address: '127.0.0.1',
  quiet: true,
  async onAuthenticate(data) {
    if (data.token !== token) throw new Error('forbidden');
  },
  extensions: [
    new Database({
      fetch: async ({ documentName }) => {
        const [row] = await sql`select data from bench_ref.hocuspocus_document where name = ${documentName}`;
        return row ? new Uint8Array(row.data) : null;
      },
      store: async ({ documentName, state }) => {
        stores++;
        await sql`insert into bench_ref.hocuspocus_document (name, data) values (${documentName}, ${Buffer.from(state)})
                  on conflict (name) do update set data = excluded.data, updated_at = now()`;
      },
    }),
  ],
});
process.on('SIGUSR2', () => console.log(`STORES ${stores}`));
process.on('SIGTERM', async () => {
  await server.destroy().catch(() => {});
  await sql.end({ timeout: 2 });
  process.exit(0);
});
await server.listen();
console.log('ready');
