import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { Client } from 'graphql-ws';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { spawnServiceBeside } from '../support/process.ts';
import { deepJson } from '../support/deep-json.ts';
import { collect, graphqlWsUrl, wsClient } from './support.ts';

/**
 * Issue 27 items 8, 12 and 13 on /graphql/ws, with the editors of the attack on two processes
 * (this one and a spawned API process on the same database): every frame is measured before it
 * is parsed (4413 past the POST /graphql body limit), every subscribe message gets the HTTP
 * document limits (depth, aliases, cost), the documents one socket holds are bounded, a socket
 * serves exactly 100 subscriptions, and deeply nested variables are refused before coercion.
 */
let a: TestServer;
let b: { proc: ReturnType<typeof Bun.spawn>; url: string };
let p: GqlProject;
let sk: string;
const clients: Client[] = [];

beforeAll(async () => {
  a = await startTestServer();
  b = await spawnServiceBeside(a, 'api', { SVC_READ_POOL: '1' });
  p = await gqlProject(
    a,
    [
      {
        key: 'post',
        name: 'Post',
        fields: [
          { key: 'title', type: 'text', queryable: true },
          { key: 'parent', type: 'reference', config: { modelKey: 'post' } },
        ],
      },
    ] as never,
    'ws-limits',
  );
  sk = await p.key('sk', ALL_SECRET);
}, 60_000);
afterAll(async () => {
  for (const c of clients) await c.dispose();
  b.proc.kill('SIGTERM');
  await b.proc.exited;
  await a.stop();
});

const RECORD = 'subscription { recordChanged(modelKey: "post") { action recordId } }';

function client(url: string) {
  return wsClient(url, { apiKey: sk }, clients);
}

/** A raw graphql-transport-ws socket, acknowledged, that records what it receives and its close. */
async function rawSocket(url: string) {
  const ws = new WebSocket(graphqlWsUrl(url), 'graphql-transport-ws');
  const messages: any[] = [];
  let closed: { code: number; reason: string } | undefined;
  ws.onmessage = (e) => messages.push(JSON.parse(String(e.data)));
  ws.onclose = (e) => (closed = { code: e.code, reason: e.reason });
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error('socket failed'));
  });
  ws.send(JSON.stringify({ type: 'connection_init', payload: { apiKey: sk } }));
  await eventually(() => messages.some((m) => m.type === 'connection_ack') || closed !== undefined, 10_000);
  return { ws, messages, closed: () => closed };
}

async function healthy(url: string): Promise<void> {
  const r = await fetch(`${url}/health`);
  expect(r.status).toBe(200);
}

/** Probes with writes through process A until the subscription on `got` hears one. */
async function hears(got: any[]): Promise<void> {
  const end = Date.now() + 15_000;
  while (got.length === 0) {
    if (Date.now() > end) throw new Error('the subscription never heard a write');
    await p.gql(sk, `mutation { createPost(data: { title: "probe" }) { _id } }`);
    await Bun.sleep(200);
  }
}

describe('/graphql/ws frames and documents (item 8)', () => {
  test('a subscribe frame past the body limit closes with 4413 on either process, unparsed', async () => {
    for (const url of [a.apiUrl, b.url]) {
      const s = await rawSocket(url);
      // 1.2 MB: under Bun's hard frame cap (2 MB), over the 1 MB limit.
      const query = `${RECORD} #${'x'.repeat(1_200_000)}`;
      s.ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query } }));
      await eventually(() => s.closed() !== undefined, 10_000);
      expect(s.closed()).toEqual({ code: 4413, reason: 'Message exceeds 1000000 bytes' });
      // Past the hard cap (12 MiB, the size), the frame is dropped before it is buffered.
      const big = await rawSocket(url);
      big.ws.send(
        JSON.stringify({
          id: '1',
          type: 'subscribe',
          payload: { query: `${RECORD} #${'x'.repeat(12 * 1024 * 1024)}` },
        }),
      );
      await eventually(() => big.closed() !== undefined, 10_000);
      expect(big.closed()!.code).toBe(1009);
      // Multi-byte text counts in bytes: 400,000 × "報" is 1.2 MB of UTF-8.
      const wide = await rawSocket(url);
      wide.ws.send(
        JSON.stringify({ id: '1', type: 'subscribe', payload: { query: `${RECORD} #${'報'.repeat(400_000)}` } }),
      );
      await eventually(() => wide.closed() !== undefined, 10_000);
      expect(wide.closed()!.code).toBe(4413);
      await healthy(url);
    }
  }, 60_000);

  test('depth, aliases and cost limits of POST /graphql apply to every subscribe message', async () => {
    const { c } = client(b.url);
    let deep = 'action';
    for (let i = 0; i < 30; i++) deep = `f${i} { ${deep} }`;
    const aliases = `subscription { ${Array.from({ length: 40 }, (_, i) => `a${i}: recordChanged(modelKey: "post") { action }`).join(' ')} }`;
    const cases: [string, string][] = [
      [aliases, 'TOO_MANY_ALIASES'],
      // Limits run before validation: the fields need not exist to be counted.
      [`subscription { recordChanged(modelKey: "post") { ${deep} } }`, 'QUERY_TOO_DEEP'],
      [
        `subscription { posts(first: 100) { edges { node { ${Array.from({ length: 250 }, (_, i) => `f${i}`).join(' ')} } } } }`,
        'QUERY_TOO_COMPLEX',
      ],
      [
        `subscription { recordChanged(modelKey: "post") { action ${'recordId '.repeat(25_000)} } }`,
        'GRAPHQL_PARSE_FAILED',
      ],
    ];
    for (const [query, code] of cases) {
      const s = collect(c, query);
      await eventually(() => s.state.error !== undefined, 10_000);
      expect(s.state.error[0].extensions.code).toBe(code);
    }
    // The same documents over HTTP answer the same codes.
    const r = await p.gql(sk, aliases);
    expect(r.body.errors[0].extensions.code).toBe('TOO_MANY_ALIASES');
  }, 30_000);

  test('the documents one socket holds are bounded: past 1 MB in all, a subscribe is refused', async () => {
    const { c, closes } = client(b.url);
    const pad = (i: number) =>
      `subscription S${i} { recordChanged(modelKey: "post") { action recordId } } #${'y'.repeat(300_000)}`;
    const subs = [0, 1, 2].map((i) => collect(c, pad(i)));
    const fourth = collect(c, pad(3));
    await eventually(() => fourth.state.error !== undefined, 10_000);
    expect(fourth.state.error[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
    await hears(subs[2]!.got);
    expect(subs.every((s) => s.state.error === undefined)).toBe(true);
    // One ends: its bytes are free again.
    subs[0]!.stop();
    const again = collect(c, pad(4));
    await hears(again.got);
    expect(again.state.error).toBeUndefined();
    expect(closes).toEqual([]);
  }, 30_000);
});

describe('/graphql/ws subscriptions per socket (item 12)', () => {
  test('a socket serves 100 subscriptions; the 101st is refused; one ended makes room', async () => {
    const { c } = client(b.url);
    const subs = Array.from({ length: 100 }, (_, i) =>
      collect(c, `subscription S${i} { recordChanged(modelKey: "post") { action recordId } }`),
    );
    // The 100th hears a write made through the other process.
    await hears(subs[99]!.got);
    expect(subs.filter((s) => s.state.error !== undefined)).toEqual([]);
    const extra = collect(c, RECORD);
    await eventually(() => extra.state.error !== undefined, 10_000);
    expect(extra.state.error[0].extensions.code).toBe('RATE_LIMITED');
    expect(extra.state.error[0].message).toBe('At most 100 subscriptions per connection');
    subs[0]!.stop();
    const room = collect(c, RECORD);
    await hears(room.got);
    expect(room.state.error).toBeUndefined();
  }, 60_000);
});

describe('/graphql/ws variables (item 13)', () => {
  test('a where nested 20,000 levels in subscribe variables is BAD_USER_INPUT before coercion', async () => {
    const s = await rawSocket(a.apiUrl);
    let w: unknown = { title: { eq: 'x' } };
    for (let i = 0; i < 20_000; i++) w = { AND: [w] };
    s.ws.send(
      deepJson({
        id: 'deep',
        type: 'subscribe',
        payload: { query: 'subscription($m: String!) { recordChanged(modelKey: $m) { action } }', variables: { m: w } },
      }),
    );
    await eventually(() => s.messages.some((m) => m.id === 'deep') || s.closed() !== undefined, 10_000);
    const m = s.messages.find((x) => x.id === 'deep');
    expect(m.type).toBe('error');
    expect(m.payload[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(m.payload[0].message).toContain('levels deep');
    expect(s.closed()).toBeUndefined();
    s.ws.close();
  }, 30_000);
});

describe('/graphql/ws frame fuzz', () => {
  /** Hostile text: NUL bytes, lone surrogates, non-ASCII, long runs. */
  const hostile = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 50 }),
    fc.constantFrom('\u0000', '\ud800', '\udfff', 'Zürich-報告', '💥'.repeat(1000), 'x'.repeat(70_000)),
  );
  const nested = fc.nat({ max: 30_000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n)}`);
  const frame = fc.oneof(
    hostile,
    nested,
    fc
      .record({
        id: hostile,
        type: fc.constantFrom('subscribe', 'complete', 'ping', 'pong', 'connection_init', 'next', 'nope'),
        payload: fc.oneof(
          fc.constant(undefined),
          fc.record({
            query: fc.oneof(hostile, fc.constant(RECORD)),
            variables: fc.oneof(fc.constant(undefined), fc.dictionary(hostile, hostile)),
          }),
        ),
      })
      .map((f) => JSON.stringify(f)),
    fc
      .integer({ min: 999_000, max: 1_100_000 })
      .map((n) => JSON.stringify({ id: '1', type: 'subscribe', payload: { query: `${RECORD} #${'z'.repeat(n)}` } })),
  );
  test('random frames are answered or closed with a protocol close code; the process stays healthy', async () => {
    const codes = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.array(frame, { minLength: 1, maxLength: 4 }), fc.boolean(), async (frames, other) => {
        const s = await rawSocket(other ? b.url : a.apiUrl);
        for (const f of frames) if (s.closed() === undefined) s.ws.send(f);
        // A ping after the frames: an answered pong or a close tells that the socket was handled.
        if (s.closed() === undefined) s.ws.send(JSON.stringify({ type: 'ping' }));
        await eventually(() => s.closed() !== undefined || s.messages.some((m) => m.type === 'pong'), 10_000);
        const code = s.closed()?.code;
        if (code !== undefined) {
          codes.set(code, (codes.get(code) ?? 0) + 1);
          // 4429: a second connection_init (graphql-ws); 4409: a subscription id reused.
          expect([4400, 4409, 4413, 4429, 1009]).toContain(code);
        }
        s.ws.close();
      }),
      { seed: 27, numRuns: 60 },
    );
    await healthy(a.apiUrl);
    await healthy(b.url);
    console.log(`ws frame fuzz: close codes ${JSON.stringify([...codes])}`);
  }, 120_000);
});
