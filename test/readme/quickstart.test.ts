import { afterAll, beforeAll, expect, setDefaultTimeout, test } from 'bun:test';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { freshDatabase } from '../support/db.ts';
import { spawnService } from '../support/process.ts';
import { removeTempDir, tempDir } from '../support/tmp.ts';

/**
 * The README's quick start, exactly as written: the first ```sh block under "## Quick start" is
 * cut out of README.md and run with bash against a fresh `bun src/main.ts` on a fresh database,
 * from a folder where svc is installed the way npm installs a package (node_modules/svc and its
 * bin, beside bun). What a user sees is asserted: the draft hidden from the public key, the
 * published page read with it, and the SSE stream carrying both changes.
 */
setDefaultTimeout(180_000);
const ROOT = resolve(import.meta.dir, '..', '..');

function quickStartBlock(readme: string): string {
  const section = readme.indexOf('\n## Quick start\n');
  if (section === -1) throw new Error('README.md has no "## Quick start" section');
  const open = readme.indexOf('\n```sh\n', section);
  const close = readme.indexOf('\n```\n', open + 1);
  if (open === -1 || close === -1) throw new Error('no ```sh block under "## Quick start"');
  return readme.slice(open + '\n```sh\n'.length, close + 1);
}

let dir: string;
let service: { proc: Subprocess; apiUrl: string; realtimeUrl: string };

beforeAll(async () => {
  dir = tempDir('svc-readme-');
  // What `npm install svc` leaves: the package, its `svc` bin and bun's in node_modules/.bin.
  mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'quickstart', private: true }));
  symlinkSync(ROOT, join(dir, 'node_modules', 'svc'));
  symlinkSync('../svc/bin/svc.ts', join(dir, 'node_modules', '.bin', 'svc'));
  symlinkSync(process.execPath, join(dir, 'node_modules', '.bin', 'bun'));
  // The data dir is the folder's ./.svc, as `npm start` makes it; the root token is generated.
  service = await spawnService(
    {
      DATABASE_URL: await freshDatabase('readme'),
      SVC_DATA_DIR: join(dir, '.svc'),
      SVC_ROOT_TOKEN: '',
      SVC_LOG: 'off',
    },
    { role: 'all', cwd: ROOT, timeoutMs: 60_000 },
  );
});

afterAll(async () => {
  service?.proc.kill('SIGTERM');
  await service?.proc.exited;
  if (dir) removeTempDir(dir);
});

test('the README quick start runs verbatim: the draft is hidden, the published page is read with the public key, SSE delivers both changes', async () => {
  const block = quickStartBlock(readFileSync(join(ROOT, 'README.md'), 'utf8'));
  writeFileSync(join(dir, 'quickstart.sh'), block);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('SVC_')) env[k] = v;
  // Only what the block says may be redirected: the two URLs.
  Object.assign(env, { SVC_URL: service.apiUrl, REALTIME_URL: service.realtimeUrl });
  const run = Bun.spawn(['bash', '-e', '-o', 'pipefail', 'quickstart.sh'], {
    cwd: dir,
    env,
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const timer = setTimeout(() => run.kill('SIGKILL'), 150_000);
  const [out, err, code] = await Promise.all([
    new Response(run.stdout).text(),
    new Response(run.stderr).text(),
    run.exited,
  ]);
  clearTimeout(timer);
  expect({ code, err: code === 0 ? '' : err, out: code === 0 ? '' : out }).toEqual({ code: 0, err: '', out: '' });

  const answers = out
    .split('\n')
    .filter((l) => l.startsWith('{"data"'))
    .map((l) => JSON.parse(l));
  expect(answers[0]).toEqual({ data: { pages: { totalCount: 0 } } });
  const id = answers[1].data.publishPageVersion._id as string;
  expect(id).toMatch(/^rec_/);
  expect(answers[2]).toEqual({ data: { page: { _id: id, title: 'Hello' } } });

  // The SSE stream the block saved: connected, then the page's creation and publication.
  const frames = out
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)));
  expect(frames[0]).toEqual({ channel: 'changes:page' });
  expect(frames.slice(1).map((f) => [f.event, f.data.recordId, f.data.modelKey])).toEqual([
    ['record.created', id, 'page'],
    ['record.published', id, 'page'],
  ]);
  expect(readFileSync(join(dir, 'site', '.env'), 'utf8')).toMatch(/^SVC_PUBLIC_KEY=pk_/m);
});
