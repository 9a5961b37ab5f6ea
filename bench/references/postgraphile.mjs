/**
 * postgraphile: PostGraphile v5 (amber preset) over the bench_ref schema, on Node, answering
 * the equivalent documents (allArticles / allListings with condition + orderBy).
 * Env: PORT, BENCH_DATABASE_URL.
 */
import { createServer } from 'node:http';
import { postgraphile } from 'postgraphile';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { makePgService } from 'postgraphile/adaptors/pg';
import { grafserv } from 'postgraphile/grafserv/node';

const preset = {
  extends: [PostGraphileAmberPreset],
  pgServices: [
    makePgService({
      connectionString: process.env.BENCH_DATABASE_URL,
      schemas: ['bench_ref'],
      poolConfig: { max: 10 },
    }),
  ],
  grafserv: { graphiql: false, watch: false },
  grafast: { explain: false },
};

const pgl = postgraphile(preset);
const serv = pgl.createServ(grafserv);
const server = createServer();
server.on('error', (e) => {
  console.error(e.message);
  process.exit(1);
});
serv.addTo(server).then(() => server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('ready')));
