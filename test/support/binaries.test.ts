import { expect, test } from 'bun:test';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { locate, need } from './binaries.ts';

/**
 * How the browser and media tests find their programs: an env variable first, else the usual
 * names on PATH; a missing one is a skip with one line naming the Debian package, and a failure
 * in CI. Programs are hidden with PATH and env variables, never uninstalled.
 */
function withFakeBin<T>(name: string, fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bin-'));
  try {
    writeFileSync(join(dir, name), '#!/bin/sh\nexit 0\n');
    chmodSync(join(dir, name), 0o755);
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the browser is found under any of its usual names on PATH, or where SVC_CHROMIUM / CHROME_PATH says', () => {
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    withFakeBin(name, (dir) => expect(locate('chromium', { PATH: dir })).toEqual({ path: join(dir, name) }));
  }
  withFakeBin('my-chrome', (dir) => {
    expect(locate('chromium', { PATH: '', SVC_CHROMIUM: join(dir, 'my-chrome') })).toEqual({
      path: join(dir, 'my-chrome'),
    });
    expect(locate('chromium', { PATH: '', CHROME_PATH: join(dir, 'my-chrome') })).toEqual({
      path: join(dir, 'my-chrome'),
    });
  });
});

test('an env variable naming a missing file, `off`, or an empty PATH is missing, and says which', () => {
  withFakeBin('chromium', (dir) => {
    // The variable wins over PATH: a wrong SVC_CHROMIUM is reported, not papered over.
    expect(locate('chromium', { PATH: dir, SVC_CHROMIUM: '/nonexistent/chromium' })).toEqual({
      missing: 'SVC_CHROMIUM=/nonexistent/chromium is not an executable file',
    });
  });
  expect(locate('ffmpeg', { PATH: '', SVC_FFMPEG: 'off' })).toEqual({ missing: 'SVC_FFMPEG=off' });
  expect(locate('ffmpeg', { PATH: '' })).toEqual({ missing: 'no ffmpeg on PATH and SVC_FFMPEG unset' });
});

test('missing: a skip (undefined) off CI; with CI set, an error naming the Debian package', () => {
  const lines: string[] = [];
  expect(need('ffmpeg', { PATH: '' }, (l) => lines.push(l))).toBeUndefined();
  expect(need('chromium', { PATH: '', CI: 'false' }, (l) => lines.push(l))).toBeUndefined();
  expect(lines).toEqual([
    'skip: ffmpeg not found (no ffmpeg on PATH and SVC_FFMPEG unset): its tests are skipped; install the Debian package "ffmpeg" (apt-get install ffmpeg)',
    'skip: chromium not found (no chromium, chromium-browser, google-chrome, google-chrome-stable on PATH and SVC_CHROMIUM, CHROME_PATH unset): its tests are skipped; install the Debian package "chromium" (apt-get install chromium)',
  ]);
  expect(() => need('chromium', { PATH: '', CI: 'true' })).toThrow(
    /chromium not found .*CI=true.*apt-get install chromium/,
  );
  expect(() => need('ffmpeg', { PATH: '', CI: '1' })).toThrow(/apt-get install ffmpeg/);
  withFakeBin('ffmpeg', (dir) => expect(need('ffmpeg', { PATH: dir, CI: 'true' })).toBe(join(dir, 'ffmpeg')));
});
