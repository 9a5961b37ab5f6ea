import { describe, expect, test } from 'bun:test';
import * as Y from 'yjs';
import { OUTSIDE, UNKNOWN, refusedPlaces, skipUpdate, touchedPlaces } from '../../src/collab/guard.ts';

/**
 * Which fields a Yjs update touches, found before it is applied — including items whose field
 * Yjs only infers from a neighbour (typing in the middle of a text, replacing a map value).
 */
function pair(): { server: Y.Doc; client: Y.Doc; capture(fn: () => void): Uint8Array } {
  const server = new Y.Doc();
  const content = server.getMap('content');
  server.transact(() => {
    content.set('title', new Y.Text('Hello world'));
    content.set('secret', new Y.Text('classified'));
    content.set('count', 1);
  });
  const client = new Y.Doc();
  Y.applyUpdate(client, Y.encodeStateAsUpdate(server));
  return {
    server,
    client,
    capture(fn) {
      const updates: Uint8Array[] = [];
      const h = (u: Uint8Array) => updates.push(u);
      client.on('update', h);
      fn();
      client.off('update', h);
      return Y.mergeUpdates(updates);
    },
  };
}

const text = (d: Y.Doc, k: string) => d.getMap('content').get(k) as Y.Text;

describe('touchedPlaces', () => {
  test('typing in the middle, at the end, deleting: the field of the neighbour', () => {
    const { client, capture, server } = pair();
    expect([
      ...touchedPlaces(
        server,
        capture(() => text(client, 'title').insert(5, ',')),
      ),
    ]).toEqual(['title']);
    expect([
      ...touchedPlaces(
        server,
        capture(() => text(client, 'secret').insert(10, '!')),
      ),
    ]).toEqual(['secret']);
    expect([
      ...touchedPlaces(
        server,
        capture(() => text(client, 'secret').delete(0, 3)),
      ),
    ]).toEqual(['secret']);
  });

  test('replacing a value, a new key, another root type', () => {
    const { client, capture, server } = pair();
    expect([
      ...touchedPlaces(
        server,
        capture(() => client.getMap('content').set('count', 2)),
      ),
    ]).toEqual(['count']);
    expect([
      ...touchedPlaces(
        server,
        capture(() => client.getMap('content').set('secret', 'plain')),
      ),
    ]).toEqual(['secret']);
    expect([
      ...touchedPlaces(
        server,
        capture(() => client.getMap('content').set('fresh', new Y.Text('x'))),
      ),
    ]).toEqual(['fresh']);
    expect([
      ...touchedPlaces(
        server,
        capture(() => client.getMap('cursors').set('me', 1)),
      ),
    ]).toEqual([OUTSIDE]);
  });

  test('a new text and typing into it in one update, then later: its field', () => {
    const { client, capture, server } = pair();
    const u1 = capture(() => {
      client.getMap('content').set('body', new Y.Text());
      text(client, 'body').insert(0, 'abc');
    });
    expect([...touchedPlaces(server, u1)]).toEqual(['body']);
    Y.applyUpdate(server, u1);
    expect([
      ...touchedPlaces(
        server,
        capture(() => text(client, 'body').insert(1, 'z')),
      ),
    ]).toEqual(['body']);
  });

  test('an update the server already has, deletes of deleted items: nothing', () => {
    const { client, capture, server } = pair();
    const u = capture(() => text(client, 'title').delete(0, 1));
    Y.applyUpdate(server, u);
    expect(touchedPlaces(server, u).size).toBe(0);
    // A sync step 2 from a client in step: its whole delete set, nothing new.
    expect(touchedPlaces(server, Y.encodeStateAsUpdate(client, Y.encodeStateVector(server))).size).toBe(0);
  });

  test('an item whose neighbour the server never saw: unknown', () => {
    const { client, capture, server } = pair();
    capture(() => text(client, 'title').insert(0, 'a')); // never sent
    expect([
      ...touchedPlaces(
        server,
        capture(() => text(client, 'title').insert(1, 'b')),
      ),
    ]).toEqual([UNKNOWN]);
  });
});

describe('refusing an update', () => {
  test('the rule names the refused fields; read-only refuses anything', () => {
    const { client, capture, server } = pair();
    const u = capture(() => {
      text(client, 'title').insert(0, '>');
      text(client, 'secret').insert(0, '>');
    });
    expect(refusedPlaces({ all: false, denied: new Set(['secret']) }, server, u)).toEqual(['secret']);
    expect(refusedPlaces({ all: false, denied: new Set(['count']) }, server, u)).toEqual([]);
    expect(refusedPlaces(null, server, u)).toEqual([]);
    expect(refusedPlaces({ all: true }, server, u).sort()).toEqual(['secret', 'title']);
  });

  test('skipUpdate takes the clock range without content: the editor’s next update applies', () => {
    const { client, capture, server } = pair();
    const refused = capture(() => text(client, 'secret').insert(0, 'leaked '));
    const peer = new Y.Doc();
    Y.applyUpdate(peer, Y.encodeStateAsUpdate(server));
    const fills: Uint8Array[] = [];
    server.on('update', (u: Uint8Array) => fills.push(u));
    skipUpdate(server, refused, 'skip');
    expect(text(server, 'secret').toString()).toBe('classified');
    for (const f of fills) Y.applyUpdate(peer, f);
    const next = capture(() => text(client, 'title').insert(11, '!'));
    expect(touchedPlaces(server, next)).toEqual(new Set(['title']));
    Y.applyUpdate(server, next);
    Y.applyUpdate(peer, next);
    expect(text(server, 'title').toString()).toBe('Hello world!');
    expect(text(peer, 'title').toString()).toBe('Hello world!');
    expect(text(peer, 'secret').toString()).toBe('classified');
    expect(server.store.pendingStructs).toBeNull();
  });
});
