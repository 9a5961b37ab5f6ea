/**
 * Floor servers for the `collab` load (bench/collab-floor.ts): what a Bun WebSocket server costs
 * per update before any room logic. FLOOR_MODE:
 *  - `relay`: answers sync step 1 with an empty step 2 and publishes every other frame to the
 *    room's topic (uWebSockets pub/sub), as the gateway does: receive + send, nothing else;
 *  - `apply`: the same plus `Y.applyUpdate` of each update into the room's document (a RoomDoc,
 *    as the gateway's rooms), the least a server that keeps the document must do per keystroke.
 * Rooms are the URL path, one document each; PORT / HOST from the environment.
 */
import * as Y from 'yjs';
import { syncStep2Frame } from '../../src/collab/protocol.ts';
import { RoomDoc } from '../../src/collab/room-doc.ts';

const mode = process.env.FLOOR_MODE ?? 'relay';
const empty = new Y.Doc();
const step2 = syncStep2Frame(empty, Y.encodeStateVector(empty));
const docs = new Map<string, Y.Doc>();

const server = Bun.serve<{ room: string }>({
  port: Number(process.env.PORT),
  hostname: process.env.HOST ?? '127.0.0.1',
  fetch(req, srv) {
    if (srv.upgrade(req, { data: { room: new URL(req.url).pathname } })) return undefined;
    return new Response('ok');
  },
  websocket: {
    open(ws) {
      ws.subscribe(ws.data.room);
    },
    message(ws, m) {
      const b = m as Buffer;
      // [0 sync, 0 step 1, …]: the client's sync step 1.
      if (b[0] === 0 && b[1] === 0) return void ws.send(step2);
      if (mode === 'apply' && b[0] === 0) {
        let doc = docs.get(ws.data.room);
        if (!doc) docs.set(ws.data.room, (doc = new RoomDoc()));
        // [0 sync, 2 update, varint length, update]: updates of one keystroke are < 128 bytes.
        Y.applyUpdate(doc, b.subarray(3), ws);
      }
      ws.publish(ws.data.room, b);
    },
  },
});
console.log(`floor server (${mode}) on ${server.port}`);
