/**
 * The measurement behind docs/decisions.md "No GraphQL Yoga in front of the core": the cost of
 * putting GraphQL Yoga (what @elysiajs/graphql-yoga mounts: envelop, graphql-js execution) in front of a query, against a
 * plain Elysia route running the same document compiled by graphql-jit, as svc does. Each
 * server runs in its own child process; load comes from this process (bench/load.ts).
 *
 *   bun bench/yoga-probe.ts            # prints import cost and req/s of both, 3 s each
 */
import { spawn } from 'node:child_process';
import { Elysia } from 'elysia';
import { buildSchema, parse } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { runPlan } from './load.ts';
import { freePort } from '../src/store/ports.ts';
import { ensurePeers, PEER_DIR } from './peers.ts';

const SDL = 'type Item { id: ID! title: String! rating: Int! } type Query { items(first: Int!): [Item!]! }';
const items = (n: number) => Array.from({ length: n }, (_, i) => ({ id: String(i), title: `t${i}`, rating: i }));
const QUERY = '{ items(first: 10) { id title rating } }';

async function serve(kind: string, port: number): Promise<void> {
  if (kind === 'yoga') {
    // What @elysiajs/graphql-yoga mounts: a Yoga instance answering the route's Request.
    // Imported by a computed name: its type declarations redefine DOM globals (ReadableStream)
    // for the whole program, which breaks Bun's stream types elsewhere.
    // Yoga is a benchmark peer, installed into bench/.peers (bench/peers.ts), not a dependency.
    ensurePeers();
    const yogaModule = Bun.resolveSync('graphql-yoga', PEER_DIR);
    const { createSchema, createYoga } = await import(yogaModule);
    const y = createYoga({
      schema: createSchema({
        typeDefs: SDL,
        resolvers: { Query: { items: (_: unknown, a: { first: number }) => items(a.first) } },
      }),
      graphiql: false,
    });
    new Elysia().all('/graphql', ({ request }) => y.fetch(request), { parse: 'none' }).listen(port);
  } else {
    const schema = buildSchema(SDL);
    schema.getQueryType()!.getFields().items!.resolve = (_: unknown, a: { first: number }) => items(a.first);
    const compiled = new Map<string, any>();
    new Elysia()
      .post(
        '/graphql',
        async ({ request }) => {
          const body = (await request.json()) as { query: string };
          let c = compiled.get(body.query); // eslint-style any: a probe, not product code
          if (!c) compiled.set(body.query, (c = compileQuery(schema, parse(body.query))));
          if (!isCompiledQuery(c)) return new Response(JSON.stringify(c), { status: 400 });
          const r = await c.query(undefined, {}, {});
          return new Response(c.stringify(r), { headers: { 'content-type': 'application/json' } });
        },
        { parse: 'none' },
      )
      .listen(port);
  }
  console.log('ready');
}

async function importCost(): Promise<string> {
  const code =
    "const t=performance.now(); const r0=process.memoryUsage().rss; await import('graphql-yoga'); console.log(JSON.stringify({ ms: performance.now()-t, mb: (process.memoryUsage().rss-r0)/1048576 }))";
  const out = await new Promise<string>((res) => {
    let s = '';
    ensurePeers();
    const p = spawn(process.execPath, ['-e', code], { cwd: PEER_DIR });
    p.stdout.on('data', (c) => (s += c));
    p.on('exit', () => res(s.trim()));
  });
  return out;
}

async function measure(kind: string): Promise<{ rps: number; p50: number; p99: number; errors: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [import.meta.path, 'serve', kind, String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((res) => child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && res()));
  try {
    const r = await runPlan({
      url: `http://127.0.0.1:${port}/graphql`,
      mode: 'request',
      body: JSON.stringify({ query: QUERY }),
      headerSets: [{}],
      connections: 32,
      warmupMs: 1000,
      durationMs: 3000,
    });
    return { rps: Math.round(r.rps), p50: r.p50, p99: r.p99, errors: r.errors };
  } finally {
    child.kill('SIGKILL');
  }
}

if (process.argv[2] === 'serve') await serve(process.argv[3]!, Number(process.argv[4]));
else {
  console.log('import graphql-yoga:', await importCost());
  const jit = await measure('jit');
  const yo = await measure('yoga');
  console.log('elysia + graphql-jit:', JSON.stringify(jit));
  console.log('elysia + graphql-yoga:', JSON.stringify(yo), `→ ${(yo.rps / jit.rps).toFixed(2)}× the req/s`);
}
