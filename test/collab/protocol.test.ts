import { describe, expect, test } from 'bun:test';
import * as Y from 'yjs';
import * as prng from 'lib0/prng';
import { FrameError, parseFrame, updateFrame } from '../../src/collab/protocol.ts';

/**
 * parseFrame refuses what Yjs would apply half-way. Yjs integrates an update's structs before it
 * fails on a broken one or on its delete set, so a frame that decodes is not yet safe to apply:
 * real updates are mutated byte by byte (a fixed seed: the same frames every run) and every
 * mutation parseFrame accepts must apply in full or not throw at all.
 */
function seedDoc(): Y.Doc {
  const doc = new Y.Doc();
  const m = doc.getMap('content');
  m.set('title', new Y.Text('hello world'));
  (m.get('title') as Y.Text).insert(3, 'XYZ');
  (m.get('title') as Y.Text).delete(0, 2);
  m.set('n', 5);
  return doc;
}

function edits(seed: Uint8Array): Uint8Array[] {
  const make = (f: (m: Y.Map<unknown>) => void) => {
    const d = new Y.Doc();
    Y.applyUpdate(d, seed);
    const sv = Y.encodeStateVector(d);
    f(d.getMap('content'));
    return Y.encodeStateAsUpdate(d, sv);
  };
  return [
    make((m) => {
      (m.get('title') as Y.Text).insert(4, 'more');
      m.set('k', { a: 1 });
      (m.get('title') as Y.Text).delete(1, 3);
    }),
    make((m) => {
      (m.get('title') as Y.Text).delete(2, 5);
      m.delete('n');
      (m.get('title') as Y.Text).insert(0, 'ab');
    }),
    make((m) => {
      const arr = new Y.Array();
      m.set('list', arr);
      arr.insert(0, [1, 2, 'x', new Y.Map()]);
      arr.delete(1, 1);
    }),
  ];
}

describe('parseFrame', () => {
  test('real updates pass; mutated ones it accepts never fail half-way in Yjs', () => {
    const seed = Y.encodeStateAsUpdate(seedDoc());
    const updates = edits(seed);
    for (const u of updates) expect(parseFrame(updateFrame(u)).type).toBe('update');
    const gen = prng.create(14);
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < 30_000; i++) {
      const u = updates[i % updates.length]!.slice();
      for (let f = 0; f <= i % 4; f++) u[prng.uint32(gen, 0, u.length - 1)] = prng.uint32(gen, 0, 255);
      try {
        parseFrame(updateFrame(u));
      } catch (err) {
        expect(err).toBeInstanceOf(FrameError);
        refused++;
        continue;
      }
      accepted++;
      const doc = new Y.Doc();
      Y.applyUpdate(doc, seed);
      expect(() => Y.applyUpdate(doc, u)).not.toThrow();
    }
    // Both kinds occurred: the loop tested something.
    expect(accepted).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(1000);
  }, 60_000);
});
