/**
 * `bun bench/collab-micro.ts [step]`: CPU per keystroke of each step of the gateway's update path,
 * on documents like the `collab` scenario's: 1,000 rooms, two editors each typing one character at
 * the end of `content.body` (the updates are made up front), applied round-robin over the rooms so
 * that caches and the GC see what the gateway sees rather than one hot document. Each figure is
 * process CPU time (every thread: GC included) per update, min and median of ROUNDS (8) rounds
 * after the first; every round starts on fresh documents.
 */
import * as Y from 'yjs';
import { parseFrame, updateFrame } from '../src/collab/protocol.ts';
import { RoomDoc } from '../src/collab/room-doc.ts';
import { RoomSync } from '../src/collab/room-sync.ts';
import type { Conn } from '../src/collab/room-host.ts';

const ROOMS = 1000;
const PER = 80;
const ROUNDS = Number(process.env.ROUNDS || 8);

function roomUpdates(): Uint8Array[] {
  const a = new Y.Doc();
  const b = new Y.Doc();
  const ups: Uint8Array[] = [];
  for (const d of [a, b]) d.on('update', (u: Uint8Array, o: unknown) => void (o !== 'remote' && ups.push(u)));
  for (let i = 0; i < PER; i++) {
    const d = i % 2 ? b : a;
    const c = d.getMap('content');
    let t = c.get('body');
    d.transact(() => {
      if (!(t instanceof Y.Text)) c.set('body', (t = new Y.Text()));
      (t as Y.Text).insert((t as Y.Text).length, 'x');
    });
  }
  return ups;
}
const updates = Array.from({ length: ROOMS }, roomUpdates);
const frames = updates.map((us) => us.map(updateFrame));

type Step = () => (room: number, i: number) => void;
const ws = { send() {}, publish() {}, subscribe() {}, unsubscribe() {}, close() {} };
const host = {
  key: 'k',
  peers: new Set<string>(),
  publish() {},
  relay() {},
  changed() {},
  lastEditor: () => null,
  refused() {},
  broken() {},
};
const sync =
  (mk: () => Y.Doc): Step =>
  () => {
    const rooms = updates.map(() => new RoomSync(mk(), host));
    const conn: Conn = { ws, userId: 'u', rule: null, awarenessIds: new Set() };
    return (r, i) => rooms[r]!.frame(conn, frames[r]![i]!);
  };
const apply =
  (mk: () => Y.Doc): Step =>
  () => {
    const docs = updates.map(mk);
    return (r, i) => Y.applyUpdate(docs[r]!, updates[r]![i]!, 'x');
  };
const steps: Record<string, Step> = {
  'Y.decodeUpdate': () => (r, i) => void Y.decodeUpdate(updates[r]![i]!),
  parseFrame: () => (r, i) => void parseFrame(frames[r]![i]!),
  'Y.applyUpdate (Y.Doc)': apply(() => new Y.Doc()),
  'Y.applyUpdate (RoomDoc)': apply(() => new RoomDoc()),
  'RoomSync.frame (Y.Doc)': sync(() => new Y.Doc()),
  'RoomSync.frame (RoomDoc)': sync(() => new RoomDoc()),
};

const only = process.argv.slice(2);
if (only.length === 0) {
  // Each step in its own process: Yjs' call sites that saw a Y.Doc and a RoomDoc are
  // polymorphic, and would slow whichever ran second.
  for (const name of Object.keys(steps))
    Bun.spawnSync([process.execPath, import.meta.path, name], { stdout: 'inherit', stderr: 'inherit' });
  process.exit(0);
}
for (const [name, step] of Object.entries(steps)) {
  if (!only.includes(name)) continue;
  const per: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const fn = step();
    Bun.gc(true);
    const c0 = process.cpuUsage();
    for (let i = 0; i < PER; i++) for (let r = 0; r < ROOMS; r++) fn(r, i);
    const c = process.cpuUsage(c0);
    if (round > 0) per.push((c.user + c.system) / (PER * ROOMS));
  }
  per.sort((a, b) => a - b);
  console.log(`${name.padEnd(28)} min ${per[0]!.toFixed(2)} µs  median ${per[per.length >> 1]!.toFixed(2)} µs`);
}
// RoomSync's awareness keeps an interval per room.
process.exit(0);
