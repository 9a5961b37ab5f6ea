/**
 * `bun bench/collab-big-save.ts`: issue 27 item 9. One editor (y-websocket's WebsocketProvider)
 * of an unversioned note pushes FRAMES frames of 1.8 MiB (each under the 2 MiB frame cap) into
 * one text field of a room on a spawned service process, then leaves (the room saves at once).
 * BIG_SAVE_CHARS sets the characters per frame; BIG_SAVE_SPREAD=1 sends frame i to the i-th of
 * body, title, x1, x2, … (the largest save the room's limits let through: two fields near the
 * field limit and the rest of the document limit in keys the note does not save).
 * Meanwhile /health of that process is polled every 5 ms from this process: printed are the
 * slowest /health answers from the first frame until the save is in the record (or refused),
 * the field's length in the record, how the socket closed, and the process's RSS before/after.
 * Needs DATABASE_URL (a PostgreSQL the bench may create databases on).
 */
import * as Y from 'yjs';
import { readFileSync } from 'node:fs';
import { WebsocketProvider } from 'y-websocket';
import { startTestServer } from '../test/support/server.ts';
import { ALL_SECRET, gqlProject } from '../test/graphql/helpers.ts';
import { spawnGateway } from '../test/collab/support.ts';

const FRAMES = Number(process.env.BIG_SAVE_FRAMES ?? 6);
const FRAME_CHARS = Number(process.env.BIG_SAVE_CHARS ?? Math.round(1.8 * 1024 * 1024));
/** `spread`: frame i goes to the i-th key of SPREAD (two fields, then keys the note does not save). */
const SPREAD = process.env.BIG_SAVE_SPREAD === '1' ? ['body', 'title', 'x1', 'x2', 'x3', 'x4'] : ['body'];

const rssMb = (pid: number) =>
  Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024);

// Records are created through this process's API; the room lives on the spawned process only.
const base = await startTestServer();
const svc = await spawnGateway(base);
try {
  const p = await gqlProject(
    base,
    [
      {
        key: 'note',
        name: 'Note',
        versioned: false,
        fields: [
          { key: 'title', type: 'text', required: true },
          { key: 'body', type: 'text' },
        ],
      },
    ] as never,
    'big-save',
  );
  const key = await p.key('sk', ALL_SECRET);
  const id = (await p.gql(key, `mutation { createNote(data: { title: "big" }) { _id } }`)).body.data.createNote._id;
  const rssBefore = rssMb(svc.proc.pid);

  const doc = new Y.Doc();
  const provider = new WebsocketProvider(svc.url.replace(/^http/, 'ws'), `note:${id}:default`, doc, {
    params: { apiKey: key },
    disableBc: true,
    connect: true,
  });
  let closed: { code: number; reason: string } | null = null;
  provider.on('connection-close', (e: CloseEvent | null) => {
    if (e && !closed) closed = { code: e.code, reason: e.reason };
  });
  while (!provider.synced) await Bun.sleep(20);

  // The poller is a process of its own: this one is busy making and sending the frames, and its
  // own stalls would show as slow /health answers.
  const poll = Bun.spawn(
    [
      process.execPath,
      '-e',
      `
    const url = process.argv[1];
    for (;;) {
      const t0 = performance.now();
      await fetch(url).then((r) => r.arrayBuffer());
      console.log((performance.now() - t0).toFixed(2));
      await Bun.sleep(5);
    }`,
      `${svc.url}/health`,
    ],
    { stdout: 'pipe', stderr: 'inherit' },
  );
  const latText = new Response(poll.stdout).text();
  await Bun.sleep(200);
  const content = doc.getMap('content');
  const textOf = (k: string): Y.Text => {
    let t = content.get(k) as Y.Text | undefined;
    if (!(t instanceof Y.Text)) {
      t = new Y.Text();
      content.set(k, t);
    }
    return t;
  };
  const chunk = 'x'.repeat(FRAME_CHARS);
  let sent = 0;
  for (let i = 0; i < FRAMES && !closed; i++) {
    const t = textOf(SPREAD[i % SPREAD.length]!);
    t.insert(t.length, chunk);
    sent++;
    await Bun.sleep(300);
  }
  provider.destroy();
  // The record has the field saved (or the save was refused and nothing more comes): 15 s at most.
  let saved = 0;
  const end = Date.now() + 15_000;
  while (Date.now() < end) {
    const r = await p.gql(key, `query($id: ID!) { record(_id: $id) { content } }`, { id });
    const c = r.body.data.record?.content ?? {};
    saved = String(c.body ?? '').length + (SPREAD.length > 1 ? String(c.title ?? '').length - 3 : 0);
    if ((closed && SPREAD.length === 1) || saved >= Math.min(sent, SPREAD.length > 1 ? 2 : sent) * FRAME_CHARS) break;
    await Bun.sleep(250);
  }
  await Bun.sleep(1_000);
  poll.kill();
  const lat = (await latText).trim().split('\n').map(Number);
  const sorted = [...lat].sort((a, b) => a - b);
  const q = (x: number) => sorted[Math.min(sorted.length - 1, Math.floor(x * sorted.length))]!.toFixed(1);
  console.log(
    JSON.stringify(
      {
        frames: FRAMES,
        sent,
        frameChars: FRAME_CHARS,
        spread: SPREAD.length > 1,
        closed,
        savedChars: saved,
        health: {
          polls: lat.length,
          p50: q(0.5),
          p99: q(0.99),
          max: sorted.at(-1)!.toFixed(1),
          over100ms: lat.filter((x) => x > 100).length,
        },
        rssMb: { before: rssBefore, after: rssMb(svc.proc.pid) },
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
