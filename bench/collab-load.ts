/**
 * Load generator of the `collab` scenario (a separate process, like every bench load): `rooms`
 * rooms × 2 editors, each editor a Yjs document on a WebSocket speaking the y-websocket protocol
 * (lib0 / y-protocols encoders), typing `rate` small updates per second: one character appended
 * to `body`. Update-to-peer latency is the time from an editor's update until the room's other
 * editor's socket receives it (one clock: both run here); the update is recognised by the id of
 * its first struct (Y.decodeUpdate). After the initial sync an editor does not apply its peer's
 * updates: typing at the end of its own text needs only its own document, and applying 2,000
 * documents' worth of peers' updates made the generator, not the server, the bottleneck on a
 * 2-core box. Prints `COLLABJSON {…}`.
 *
 * argv[2]: a JSON file { urls: string[] (one per room, query included), rate, warmupMs, durationMs }
 */
import * as Y from 'yjs';
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import * as syncProtocol from 'y-protocols/sync';
import { readFileSync } from 'node:fs';
import { MESSAGE_SYNC, syncStep1Frame, updateFrame } from '../src/collab/protocol.ts';

interface Plan {
  urls: string[];
  rate: number;
  warmupMs: number;
  durationMs: number;
}

const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Plan;
const latencies: number[] = [];
let measuring = false;
let sent = 0;
let errors = 0;
let firstError: string | undefined;

interface Ed {
  doc: Y.Doc;
  ws: WebSocket;
  name: string;
  synced: boolean;
}

/** Send times by the id of the update's first struct (`client:clock`). */
const sentAt = new Map<string, number>();

function connect(url: string, name: string): Promise<Ed> {
  const doc = new Y.Doc();
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  const ed: Ed = { doc, ws, name, synced: false };
  doc.on('update', (u: Uint8Array, origin: unknown) => {
    if (origin !== 'remote' && ws.readyState === WebSocket.OPEN) ws.send(updateFrame(u));
  });
  return new Promise((resolve, reject) => {
    ws.addEventListener('open', () => ws.send(syncStep1Frame(doc)));
    ws.addEventListener('message', (e) => {
      const data = new Uint8Array(e.data as ArrayBuffer);
      const decoder = decoding.createDecoder(data);
      if (decoding.readVarUint(decoder) !== MESSAGE_SYNC) return;
      if (ed.synced) {
        // A peer's update: when was it sent?
        if (decoding.readVarUint(decoder) !== syncProtocol.messageYjsUpdate) return;
        const { structs } = Y.decodeUpdate(decoding.readVarUint8Array(decoder));
        const first = structs.find((x) => x.id.client !== doc.clientID);
        const key = first && `${first.id.client}:${first.id.clock}`;
        const t = key && sentAt.get(key);
        if (t) {
          sentAt.delete(key!);
          if (measuring) latencies.push(performance.now() - t);
        }
        return;
      }
      const reply = encoding.createEncoder();
      encoding.writeVarUint(reply, MESSAGE_SYNC);
      const type = syncProtocol.readSyncMessage(decoder, reply, doc, 'remote');
      if (encoding.length(reply) > 1) ws.send(encoding.toUint8Array(reply));
      if (type === syncProtocol.messageYjsSyncStep2 && !ed.synced) {
        ed.synced = true;
        resolve(ed);
      }
    });
    ws.addEventListener('close', (e) => {
      errors++;
      firstError ??= `closed ${e.code} ${e.reason}`;
      if (!ed.synced) reject(new Error(`closed ${e.code} ${e.reason}`));
    });
  });
}

const eds: Ed[] = [];
// Connect in batches: thousands of handshakes at once only measure the accept queue.
for (let i = 0; i < plan.urls.length; i += 50) {
  const batch = plan.urls.slice(i, i + 50).flatMap((u, j) => [connect(u, `a${i + j}`), connect(u, `b${i + j}`)]);
  eds.push(...(await Promise.all(batch)));
}

function type(ed: Ed): void {
  const content = ed.doc.getMap('content');
  let body = content.get('body');
  const key = `${ed.doc.clientID}:${Y.getState(ed.doc.store, ed.doc.clientID)}`;
  sentAt.set(key, performance.now());
  ed.doc.transact(() => {
    // The reference server starts from an empty document: the first keystroke makes the field.
    if (!(body instanceof Y.Text)) content.set('body', (body = new Y.Text()));
    (body as Y.Text).insert((body as Y.Text).length, 'x');
  });
  if (measuring) sent++;
}

const every = 1000 / plan.rate;
const timers = eds.map((ed, i) => {
  // Spread the editors over the period so updates arrive evenly.
  const start = setTimeout(() => {
    const t = setInterval(() => type(ed), every);
    timers.push(t);
  }, (i * every) / eds.length);
  return start;
});
await Bun.sleep(plan.warmupMs);
measuring = true;
console.log('COLLABSTART');
const t0 = performance.now();
await Bun.sleep(plan.durationMs);
measuring = false;
console.log('COLLABSTOP');
const seconds = (performance.now() - t0) / 1000;
for (const t of timers) clearTimeout(t as never), clearInterval(t as never);
latencies.sort((x, y) => x - y);
const q = (p: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]! : NaN);
console.log(`COLLABJSON ${JSON.stringify({ editors: eds.length, sent, seconds, updatesPerSecond: sent / seconds, delivered: latencies.length, p50: q(0.5), p99: q(0.99), errors, firstError })}`);
for (const ed of eds) ed.ws.close();
process.exit(0);
