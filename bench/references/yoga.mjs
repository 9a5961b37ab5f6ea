/**
 * GraphQL Yoga on Node 22 over the bench_ref tables through postgres.js, executing the same
 * documents as the service (what a user would otherwise assemble by hand), set up as Yoga's docs
 * recommend for speed: @envelop/graphql-jit compiling each document once (`yoga-jit`), and for
 * `yoga-cached` also @graphql-yoga/plugin-response-cache (an in-memory cache of whole responses,
 * no session: the reads are public). Yoga's parse/validate cache is on by default.
 * Run from bench/.peers (bench/peers.ts), where these packages are installed.
 * Env: PORT, BENCH_DATABASE_URL, BENCH_SDL (the reference schema), BENCH_YOGA_CACHE=1.
 */
import { createServer } from 'node:http';
import { createSchema, createYoga } from 'graphql-yoga';
import { useGraphQlJit } from '@envelop/graphql-jit';
import { useResponseCache } from '@graphql-yoga/plugin-response-cache';
import postgres from 'postgres';

const sql = postgres(process.env.BENCH_DATABASE_URL, { max: 10, onnotice: () => {} });
const edges = (rows) => ({ edges: rows.map(({ id, ...r }) => ({ cursor: id, node: { _id: id, ...r } })) });
const SORTABLE = new Set(['rank']);

const resolvers = {
  Query: {
    articles: async (_, { first }) =>
      edges(
        await sql`select id, title, slug, summary, rating, featured from bench_ref.article order by id limit ${first ?? 20}`,
      ),
    listings: async (_, { first, where, orderBy }) => {
      const eq = where?.category?.eq;
      const o = orderBy?.[0];
      const order =
        o && SORTABLE.has(o.field)
          ? sql`order by ${sql(o.field)} ${o.direction === 'DESC' ? sql`desc` : sql`asc`}`
          : sql`order by id`;
      const filter = eq !== undefined ? sql`where category = ${eq}` : sql``;
      return edges(
        await sql`select id, title, category, rank, summary, featured from bench_ref.listing ${filter} ${order} limit ${first ?? 20}`,
      );
    },
  },
};

// biome-ignore lint/correctness/useHookAtTopLevel: envelop plugins, not React hooks
const plugins = [useGraphQlJit()];
// biome-ignore lint/correctness/useHookAtTopLevel: envelop plugins, not React hooks
if (process.env.BENCH_YOGA_CACHE === '1') plugins.push(useResponseCache({ session: () => null, idFields: ['_id'] }));
const yoga = createYoga({
  schema: createSchema({ typeDefs: process.env.BENCH_SDL, resolvers }),
  graphiql: false,
  landingPage: false,
  logging: false,
  maskedErrors: true,
  plugins,
});
createServer(yoga).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('ready'));
