import { afterAll, expect, test } from 'bun:test';
import * as Y from 'yjs';
import { RoomDoc } from '../../src/collab/room-doc.ts';

/**
 * The collab gateway hands Bun's message buffers to rooms without copying them (gateway.ts):
 * a room may keep one past the handler (its mailbox, the cross-process relay batch). That holds
 * only while Bun gives each message its own buffer and never writes a later message into it.
 */
const kept: Buffer[] = [];
let done: () => void;
const all = new Promise<void>((r) => (done = r));
const N = 2_000;
const server = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch(req, s) {
    return s.upgrade(req) ? undefined : new Response('no', { status: 400 });
  },
  websocket: {
    message(_ws, m) {
      kept.push(m as Buffer);
      if (kept.length === N) done();
    },
  },
});
afterAll(() => server.stop(true));

test('each WebSocket message keeps its own bytes after later messages arrive', async () => {
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}`);
  await new Promise((r) => ws.addEventListener('open', r));
  for (let i = 0; i < N; i++) {
    const b = new Uint8Array(21).fill(i & 255);
    b[0] = i >> 8;
    ws.send(b);
  }
  await all;
  ws.close();
  expect(kept.length).toBe(N);
  const wrong = kept.filter((m, i) => m[0] !== i >> 8 || m[20] !== (i & 255) || m.byteLength !== 21);
  expect(wrong.length).toBe(0);
  expect(new Set(kept.map((m) => m.buffer)).size).toBe(N);
});

test('RoomDoc emits document events like Y.Doc', () => {
  const doc = new RoomDoc();
  const seen: string[] = [];
  doc.on('afterTransaction', () => seen.push('a1'));
  const second = () => seen.push('a2');
  doc.on('afterTransaction', second);
  // A listener added during the event is not called by it (lib0 copies the listeners first).
  doc.once('update', () => doc.on('update', () => seen.push('late')));
  doc.getMap('content').set('x', 1);
  expect(seen).toEqual(['a1', 'a2']);
  doc.off('afterTransaction', second);
  doc.getMap('content').set('x', 2);
  expect(seen).toEqual(['a1', 'a2', 'a1', 'late']);
  // One listener adding another to the same event, without leaving: not called by this event.
  const d2 = new RoomDoc();
  const calls: string[] = [];
  d2.on('afterTransaction', () => {
    calls.push('first');
    if (calls.length === 1) d2.on('afterTransaction', () => calls.push('added'));
  });
  d2.getMap('content').set('y', 1);
  expect(calls).toEqual(['first']);
  d2.getMap('content').set('y', 2);
  expect(calls).toEqual(['first', 'first', 'added']);
  const other = new Y.Doc();
  Y.applyUpdate(other, Y.encodeStateAsUpdate(doc));
  expect(other.getMap('content').get('x')).toBe(2);
});
