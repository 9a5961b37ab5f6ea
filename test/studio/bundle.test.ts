import { expect, test } from 'bun:test';
import { buildStudio } from '../../src/studio/bundle.ts';

/** The Studio builds from source, and its first load stays under 300 KB of gzip'd JavaScript. */
test('first load of /studio is under 300 KB of compressed JavaScript', async () => {
  const b = await buildStudio();
  expect(b.firstLoad[0]).toBe(b.entry);
  const kb = b.firstLoadGzipBytes / 1024;
  console.log(
    `studio first load: ${b.firstLoad.length} script(s), ${kb.toFixed(1)} KB gzip; ${b.assets.size} assets built in ${b.builtInMs} ms`,
  );
  expect(kb).toBeLessThan(300);
  // The editor's libraries (Yjs, ProseMirror) are split off and load with the record screen.
  const all = [...b.assets.values()]
    .filter((a) => a.type.startsWith('text/javascript'))
    .reduce((n, a) => n + a.gzip.byteLength, 0);
  expect(all).toBeGreaterThan(b.firstLoadGzipBytes);
}, 60_000);
