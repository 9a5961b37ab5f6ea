/**
 * One fan-out load generator process (bench/fanout.ts starts several): opens its share of the
 * subscribers (raw-TCP SSE streams or WebSockets), prints `READY <connected> <failed>`, and
 * stamps each delivery with the wall clock. The bench process makes the writes, one at a time,
 * on a channel that hears nothing else, so a subscriber's k-th event is the k-th write. Prints
 * `DONE` once every subscriber has all `writes` events; on SIGTERM (or then) it writes the
 * arrival times (Float64, subscriber-major, NaN = missing) to `out` and exits.
 */
import { readFileSync, writeFileSync } from 'node:fs';

interface Config {
  mode: 'sse' | 'ws';
  host: string;
  port: number;
  /** Path and query to subscribe on. */
  path: string;
  /** `/_events` only: the channel to subscribe to once the socket is open. */
  channel?: string;
  subscribers: number;
  writes: number;
  out: string;
}

const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const arrivals = new Float64Array(cfg.subscribers * cfg.writes).fill(NaN);
const now = () => performance.timeOrigin + performance.now();
let connected = 0;
let failed = 0;
let complete = 0;

function arrived(sub: number, k: number): void {
  if (k >= cfg.writes) return;
  arrivals[sub * cfg.writes + k] = now();
  if (k === cfg.writes - 1 && ++complete === connected) console.log('DONE');
}

function openSse(sub: number): void {
  let count = 0;
  let ready = false;
  let tail = '';
  void Bun.connect({
    hostname: cfg.host,
    port: cfg.port,
    socket: {
      open(s) {
        s.write(`GET ${cfg.path} HTTP/1.1\r\nHost: ${cfg.host}:${cfg.port}\r\nAccept: text/event-stream\r\n\r\n`);
      },
      data(_s, chunk) {
        // Data frames carry an `id: ` line; the connected frame and heartbeats do not.
        const text = tail + chunk.toString('latin1');
        if (!ready && text.includes('event: connected')) {
          ready = true;
          connected++;
        }
        for (let i = text.indexOf('id: '); i >= 0; i = text.indexOf('id: ', i + 4)) arrived(sub, count++);
        tail = text.slice(-3);
      },
      error() {
        failed++;
      },
    },
  }).catch(() => failed++);
}

function openWs(sub: number): void {
  const ws = new WebSocket(`ws://${cfg.host}:${cfg.port}${cfg.path}`);
  let count = 0;
  // On /_events the first frame is the `subscribed` reply; the relay subscribes on open.
  let subscribed = !cfg.channel;
  ws.onopen = () => {
    if (subscribed) connected++;
    else ws.send(JSON.stringify({ type: 'subscribe', channel: cfg.channel }));
  };
  ws.onmessage = () => {
    if (!subscribed) {
      subscribed = true;
      connected++;
      return;
    }
    arrived(sub, count++);
  };
  ws.onerror = () => failed++;
}

const finish = () => {
  writeFileSync(cfg.out, new Uint8Array(arrivals.buffer));
  process.exit(0);
};
process.on('SIGTERM', finish);

const open = cfg.mode === 'sse' ? openSse : openWs;
const BATCH = 250;
for (let i = 0; i < cfg.subscribers; i += BATCH) {
  const goal = Math.min(cfg.subscribers, i + BATCH);
  for (let j = i; j < goal; j++) open(j);
  const end = Date.now() + 30_000;
  while (connected + failed < goal && Date.now() < end) await Bun.sleep(5);
}
console.log(`READY ${connected} ${failed}`);
setInterval(() => {}, 1 << 30);
