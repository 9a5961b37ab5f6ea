/**
 * `bun bench/collab-big-type.ts`: issue 27 item 9, "keep saves off the event loop's critical
 * path". One editor (y-websocket's WebsocketProvider) fills a room on a spawned service process
 * to near the 4 MiB document limit, then types into it for BIG_TYPE_SECONDS (one character every
 * 40 ms at a cursor that jumps every 50 characters: the room autosaves every 2–10 s), then leaves
 * (the room saves at once). /health of that process is polled every 5 ms from a process of its
 * own, and the process measures its own event loop's delays (bench/loop-lag.ts: a /health answer
 * also waits for PostgreSQL, the clients and the poller on a busy box); printed per phase (fill,
 * type, leave) are the slowest answers and the longest hold of the event loop, the saves the
 * process committed and whether the record ends up holding what the editor typed.
 *
 * BIG_TYPE_FILL=edits (default): the two text fields are filled by inserts of 20 characters at
 *   random positions by editors taking turns every 500 inserts (some deleting): ~200,000 items from ~300 clients:
 *   what heavy editing leaves, the costly kind to encode. `paste`: two 950,000-character pastes
 *   and 1.9 MB in keys the model does not save (few items).
 * BIG_TYPE_MODEL=note (default, unversioned: saves write the record) or `article` (versioned:
 *   saves store the room's state). BIG_TYPE_TARGET: the state bytes to fill to (3,800,000).
 * BIG_TYPE_PROF=<dir>: the service process writes a CPU profile (markdown) there on exit.
 * Needs DATABASE_URL (a PostgreSQL the bench may create databases on).
 */
import * as Y from 'yjs';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WebsocketProvider } from 'y-websocket';
import { startTestServer } from '../test/support/server.ts';
import { ALL_SECRET, gqlProject } from '../test/graphql/helpers.ts';
import { spawnGateway } from '../test/collab/support.ts';

const FILL = process.env.BIG_TYPE_FILL ?? 'edits';
const MODEL = process.env.BIG_TYPE_MODEL ?? 'note';
const SECONDS = Number(process.env.BIG_TYPE_SECONDS ?? 25);
const TARGET = Number(process.env.BIG_TYPE_TARGET ?? 3_800_000);
const PROF = process.env.BIG_TYPE_PROF;

const base = await startTestServer();
// The service process's own event-loop delays (bench/loop-lag.ts), beside /health seen from outside.
const lagFile = join(base.dataDir, 'loop-lag.txt');
const svc = await spawnGateway(base, {
  bunArgs: [
    '--preload',
    join(import.meta.dir, 'loop-lag.ts'),
    ...(PROF ? ['--cpu-prof-md', `--cpu-prof-dir=${PROF}`, '--cpu-prof-interval=500'] : []),
  ],
  env: { BENCH_LOOP_LAG_FILE: lagFile },
});
let rnd = 1;
const random = () => (rnd = (rnd * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
try {
  const p = await gqlProject(
    base,
    [
      {
        key: 'note',
        name: 'Note',
        versioned: false,
        fields: [
          { key: 'title', type: 'text' },
          { key: 'body', type: 'text' },
        ],
      },
      {
        key: 'article',
        name: 'Article',
        fields: [
          { key: 'title', type: 'text' },
          { key: 'body', type: 'text' },
        ],
      },
    ] as never,
    'big-type',
  );
  const key = await p.key('sk', ALL_SECRET);
  const type = MODEL === 'note' ? 'Note' : 'Article';
  const id = (await p.gql(key, `mutation { create${type}(data: { title: "" }) { _id } }`)).body.data[`create${type}`]
    ._id;

  const doc = new Y.Doc();
  const provider = new WebsocketProvider(svc.url.replace(/^http/, 'ws'), `${MODEL}:${id}:default`, doc, {
    params: { apiKey: key },
    disableBc: true,
  });
  let closed: { code: number; reason: string } | null = null;
  provider.on('connection-close', (e: CloseEvent | null) => {
    if (e && !closed) closed = { code: e.code, reason: e.reason };
  });
  // A second editor who only watches: its presence reaches the typist every 15 s. Alone, the
  // typist would hear nothing from the server and y-websocket reconnects a socket silent for
  // 30 s (messageReconnectTimeout), resyncing the whole document each time.
  const watcher = new WebsocketProvider(svc.url.replace(/^http/, 'ws'), `${MODEL}:${id}:default`, new Y.Doc(), {
    params: { apiKey: key },
    disableBc: true,
  });
  watcher.awareness.setLocalStateField('user', { name: 'watcher' });
  while (!provider.synced || !watcher.synced) await Bun.sleep(20);

  const poll = Bun.spawn(
    [
      process.execPath,
      '-e',
      `const url = process.argv[1];
      for (;;) {
        const t0 = performance.now();
        await fetch(url).then((r) => r.arrayBuffer());
        console.log(Date.now(), (performance.now() - t0).toFixed(2));
        await Bun.sleep(5);
      }`,
      `${svc.url}/health`,
    ],
    { stdout: 'pipe', stderr: 'inherit' },
  );
  const pollOut = new Response(poll.stdout).text();
  const marks: Record<string, number> = { fill: Date.now() };

  const content = doc.getMap('content');
  const texts = ['body', 'title'].map((k) => {
    const t = new Y.Text();
    content.set(k, t);
    return t;
  });
  const size = () => Y.encodeStateAsUpdate(doc).byteLength;
  if (FILL === 'paste') {
    for (const t of texts) {
      t.insert(0, 'x'.repeat(950_000));
      await Bun.sleep(300);
    }
    // The rest in keys the model does not save (each under the field limit too).
    for (let i = 1, rest = TARGET - size() - 100; rest > 0; i++, rest -= 950_000) {
      content.set(`x${i}`, 'y'.repeat(Math.min(rest, 950_000)));
      await Bun.sleep(300);
    }
  } else {
    // Transactions of 2,000 inserts: each goes as one update (~60 KB), under the frame cap.
    const own = doc.clientID;
    let bytes = 0;
    for (let round = 0; bytes < TARGET && !closed; round++) {
      doc.transact(() => {
        for (let i = 0; i < 2_000; i++) {
          if (i % 500 === 0) doc.clientID = Math.floor(random() * 1e9);
          const t = texts[i % 2]!;
          t.insert(Math.floor(random() * t.length), 'abcdefghijklmnopqrs ');
          if (random() < 0.1 && t.length > 100) t.delete(Math.floor(random() * (t.length - 10)), 5);
        }
      });
      await Bun.sleep(40);
      if (round % 5 === 4) bytes = size();
    }
    // The provider's awareness is keyed by the document's own client id.
    doc.clientID = own;
  }
  const filled = size();
  // The room's fill-time saves are over before typing starts (the debounce is 2 s).
  await Bun.sleep(3_000);

  marks.type = Date.now();
  let cursor = 0;
  let typed = 0;
  const body = texts[0]!;
  while (Date.now() < marks.type + SECONDS * 1000 && !closed) {
    if (typed % 50 === 0) cursor = Math.floor(random() * body.length);
    body.insert(cursor++, 'k');
    typed++;
    await Bun.sleep(40);
  }
  marks.leave = Date.now();
  const expected = body.toString();
  provider.destroy();
  watcher.destroy();
  let inRecord = false;
  const end = Date.now() + 30_000;
  while (Date.now() < end && MODEL === 'note') {
    const r = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
    if (r.body.data.record?.content?.body === expected) {
      inRecord = true;
      break;
    }
    await Bun.sleep(250);
  }
  if (MODEL !== 'note') await Bun.sleep(3_000);
  marks.end = Date.now();
  await Bun.sleep(300);
  poll.kill();
  const samples = (await pollOut)
    .trim()
    .split('\n')
    .map((l) => l.split(' ').map(Number) as [number, number]);
  const lags = existsSync(lagFile)
    ? readFileSync(lagFile, 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' ').map(Number) as [number, number])
    : [];
  const phase = (from: number, to: number) => {
    const lat = samples.filter(([at, ms]) => at - ms >= from && at <= to).map(([, ms]) => ms);
    const sorted = [...lat].sort((a, b) => a - b);
    const q = (x: number) => sorted[Math.min(sorted.length - 1, Math.floor(x * sorted.length))]?.toFixed(1);
    const held = lags.filter(([at, ms]) => at - ms >= from && at <= to).map(([, ms]) => ms);
    return {
      polls: lat.length,
      p50: q(0.5),
      p99: q(0.99),
      max: sorted.at(-1)?.toFixed(1),
      over50ms: lat.filter((x) => x > 50).length,
      // The service's event loop: its longest hold, and how many holds passed 50 ms.
      loopMax: Math.max(0, ...held).toFixed(1),
      loopOver50ms: held.filter((x) => x > 50).length,
    };
  };
  const metrics = await fetch(`${svc.url}/metrics`).then((r) => r.text());
  console.log(
    JSON.stringify(
      {
        fill: FILL,
        model: MODEL,
        stateBytes: filled,
        typed,
        closed,
        saves: Number(/^svc_collab_saves_total\s+(\d+)/m.exec(metrics)?.[1] ?? NaN),
        inRecord: MODEL === 'note' ? inRecord : 'n/a',
        // Event-loop holds over 50 ms while typing and leaving: [epoch ms, ms].
        holds: lags.filter(([at, ms]) => ms > 50 && at >= marks.type!),
        health: {
          fill: phase(marks.fill!, marks.type!),
          type: phase(marks.type!, marks.leave!),
          leave: phase(marks.leave!, marks.end!),
        },
      },
      null,
      1,
    ),
  );
} finally {
  svc.proc.kill('SIGTERM');
  await svc.proc.exited;
  await base.stop();
}
process.exit(0);
