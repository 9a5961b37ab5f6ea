/**
 * Load generator of the `collab` scenario (bench/collab.ts starts one or more of these, each its
 * own process, each holding whole rooms): per room 2 editors, each editor a Yjs document on a
 * WebSocket speaking the y-websocket protocol (lib0 / y-protocols encoders), typing `rate` small
 * updates per second: one character appended to `body`. Update-to-peer latency is the time from
 * an editor's update until the room's other editor's socket receives it (one clock: both editors
 * of a room live in the same process); the update is recognised by the id of its first struct
 * (Y.decodeUpdate). After the initial sync an editor does not apply its peer's updates: typing at
 * the end of its own text needs only its own document, and applying 2,000 documents' worth of
 * peers' updates made the generator, not the server, the bottleneck on a 2-core box.
 *
 * Protocol with the parent: connect every editor, print `COLLABREADY`, wait for SIGUSR1, then
 * type; updates sent and latencies are counted from `warmupMs` after the signal for
 * `durationMs`; then print `COLLABJSON {…}` (the raw latencies included, so the parent can merge
 * several generators) and exit.
 *
 * argv[2]: a JSON file { urls: (string | [string, string])[] (one per room, query included; a pair
 * puts the room's two editors on two servers), rate, warmupMs, durationMs, hocuspocusToken? }
 *
 * With `hocuspocusToken` the editors speak the Hocuspocus protocol instead (the Hocuspocus peer):
 * every frame is prefixed by the document name (the URL's path), and an editor first sends the
 * Auth/Token message and its sync step 1; the Sync payloads are y-protocols' as above.
 */
import * as Y from 'yjs';
import * as decoding from 'lib0/decoding';
import * as encoding from 'lib0/encoding';
import * as syncProtocol from 'y-protocols/sync';
import { readFileSync } from 'node:fs';
import { MESSAGE_SYNC, syncStep1Frame, updateFrame } from '../src/collab/protocol.ts';

interface Plan {
  urls: (string | [string, string])[];
  rate: number;
  warmupMs: number;
  durationMs: number;
  hocuspocusToken?: string;
}

const plan = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Plan;
const latencies: number[] = [];
let measuring = false;
let sent = 0;
let errors = 0;
/** Update frames received after the initial sync (all of them, timed or not). */
let received = 0;
let firstError: string | undefined;

interface Ed {
  doc: Y.Doc;
  ws: WebSocket;
  synced: boolean;
}

/** Send times by the id of the update's first struct (`client:clock`). */
const sentAt = new Map<string, number>();

/** Hocuspocus frames: [document name][message type][payload]. */
const HP_SYNC = 0;
const HP_AUTH = 2;
const HP_SYNC_REPLY = 4;
function hpFrame(name: string, frame: Uint8Array): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarString(e, name);
  encoding.writeUint8Array(e, frame);
  return encoding.toUint8Array(e);
}
function hpAuth(name: string, token: string): Uint8Array {
  const e = encoding.createEncoder();
  encoding.writeVarString(e, name);
  encoding.writeVarUint(e, HP_AUTH);
  encoding.writeVarUint(e, 0); // AuthMessageType.Token
  encoding.writeVarString(e, token);
  return encoding.toUint8Array(e);
}

function connect(url: string): Promise<Ed> {
  const doc = new Y.Doc();
  const hp = plan.hocuspocusToken;
  const name = hp ? decodeURIComponent(new URL(url).pathname.slice(1)) : '';
  const frame = hp ? (f: Uint8Array) => hpFrame(name, f) : (f: Uint8Array) => f;
  const ws = new WebSocket(hp ? new URL('/', url).href : url);
  ws.binaryType = 'arraybuffer';
  const ed: Ed = { doc, ws, synced: false };
  doc.on('update', (u: Uint8Array, origin: unknown) => {
    if (origin !== 'remote' && ws.readyState === WebSocket.OPEN) ws.send(frame(updateFrame(u)));
  });
  return new Promise((resolve, reject) => {
    ws.addEventListener('open', () => {
      if (hp) ws.send(hpAuth(name, hp));
      ws.send(frame(syncStep1Frame(doc)));
    });
    ws.addEventListener('message', (e) => {
      const data = new Uint8Array(e.data as ArrayBuffer);
      const decoder = decoding.createDecoder(data);
      if (hp) {
        decoding.readVarString(decoder);
        const t = decoding.readVarUint(decoder);
        if (t !== HP_SYNC && t !== HP_SYNC_REPLY) return;
      } else if (decoding.readVarUint(decoder) !== MESSAGE_SYNC) return;
      if (ed.synced) {
        // A peer's update: when was it sent?
        if (decoding.readVarUint(decoder) !== syncProtocol.messageYjsUpdate) return;
        received++;
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
      if (encoding.length(reply) > 1) ws.send(frame(encoding.toUint8Array(reply)));
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

// Armed before connecting: the parent may signal as soon as the last generator is ready.
const go = new Promise<void>((r) => process.once('SIGUSR1', () => r()));

const eds: Ed[] = [];
// Connect in batches: thousands of handshakes at once only measure the accept queue.
for (let i = 0; i < plan.urls.length; i += 50) {
  const batch = plan.urls
    .slice(i, i + 50)
    .flatMap((u) => (Array.isArray(u) ? [connect(u[0]), connect(u[1])] : [connect(u), connect(u)]));
  eds.push(...(await Promise.all(batch)));
}
console.log('COLLABREADY');
await go;

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
const timers: ReturnType<typeof setTimeout>[] = [];
eds.forEach((ed, i) => {
  // Spread the editors over the period so updates arrive evenly.
  timers.push(setTimeout(() => timers.push(setInterval(() => type(ed), every)), (i * every) / eds.length));
});
await Bun.sleep(plan.warmupMs);
measuring = true;
const t0 = performance.now();
await Bun.sleep(plan.durationMs);
measuring = false;
const seconds = (performance.now() - t0) / 1000;
for (const t of timers) clearTimeout(t), clearInterval(t);
console.log(
  `COLLABJSON ${JSON.stringify({ editors: eds.length, sent, received, seconds, errors, firstError, latencies: latencies.map((x) => Math.round(x * 100) / 100) })}`,
);
for (const ed of eds) ed.ws.close();
process.exit(0);
