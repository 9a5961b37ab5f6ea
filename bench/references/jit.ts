/**
 * ceiling-jit: a minimal Bun server executing the bench documents with graphql-jit over
 * in-memory data (same shape and naming as the service). The GraphQL ceiling: parse, validate
 * and compile once per document, then only the compiled query runs per request.
 * Env: PORT.
 */
import { buildSchema, parse, validate } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { articleRow, listingRow, FILTERED_RECORDS, READ_RECORDS, REFERENCE_SDL } from '../data.ts';

const schema = buildSchema(REFERENCE_SDL);
const articles = Array.from({ length: READ_RECORDS }, (_, i) => articleRow(i + 1)).map(({ id, ...r }) => ({
  _id: id,
  ...r,
}));
const listings = Array.from({ length: FILTERED_RECORDS }, (_, i) => listingRow(i + 1)).map(({ id, ...r }) => ({
  _id: id,
  ...r,
}));

type Where = { category?: { eq?: string } };
type Order = { field: 'rank' | 'title' | 'category'; direction: 'ASC' | 'DESC' };
const edges = <T extends { _id: string }>(rows: T[]) => ({ edges: rows.map((node) => ({ cursor: node._id, node })) });

const views = new Map<string, typeof listings>();
const resolvers = {
  articles: (_: unknown, { first }: { first?: number }) => edges(articles.slice(0, first ?? 20)),
  listings: (_: unknown, { first, where, orderBy }: { first?: number; where?: Where; orderBy?: Order[] }) => {
    const eq = where?.category?.eq;
    const o = orderBy?.[0];
    const memo = `${eq ?? ''}|${o?.field ?? ''}|${o?.direction ?? ''}`;
    let rows = views.get(memo);
    if (!rows) {
      // An in-memory index per (filter, order): the ceiling pays for a filter and sort once.
      rows = eq === undefined ? listings : listings.filter((r) => r.category === eq);
      if (o) {
        const k = o.field;
        const d = o.direction === 'DESC' ? -1 : 1;
        rows = [...rows].sort((a, b) => (a[k] < b[k] ? -d : a[k] > b[k] ? d : 0));
      }
      views.set(memo, rows);
    }
    return edges(rows.slice(0, first ?? 20));
  },
};

const fields = schema.getQueryType()!.getFields();
fields.articles!.resolve = resolvers.articles as never;
fields.listings!.resolve = resolvers.listings as never;

const compiled = new Map<string, CompiledQuery>();
function compile(query: string): CompiledQuery | { errors: unknown[] } {
  const hit = compiled.get(query);
  if (hit) return hit;
  const doc = parse(query);
  const errors = validate(schema, doc);
  if (errors.length) return { errors: [...errors] };
  const c = compileQuery(schema, doc);
  if (!isCompiledQuery(c)) return c as { errors: unknown[] };
  compiled.set(query, c);
  return c;
}

Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  async fetch(req) {
    if (req.method !== 'POST') return new Response('ok');
    const { query, variables } = (await req.json()) as { query: string; variables?: Record<string, unknown> };
    const c = compile(query);
    if (!('query' in c)) return Response.json(c, { status: 400 });
    const result = await c.query({}, {}, variables ?? {});
    return new Response(c.stringify(result), { headers: { 'content-type': 'application/json' } });
  },
});
console.log('ready');
// Exit through process.exit so that --cpu-prof writes its profile.
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(0));
