import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { folder, minimal } from '../config/support.ts';
import { runCli } from '../../src/cli/main.ts';
import { cliCreateKey, memberKey } from '../auth/support.ts';
import { gqlAt } from '../support/process.ts';

let server: TestServer;
let p: { tenantId: string; projectId: string; ownerKey: string };
let dir: string;

/** Runs the CLI with the given environment (no SVC_TOKEN unless given). */
async function run(env: Record<string, string | undefined>, ...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCli(
    argv,
    { out: (s) => (out += s + '\n'), err: (s) => (err += s + '\n') },
    { SVC_URL: server.apiUrl, ...env },
  );
  let json: any;
  try {
    json = JSON.parse(out);
  } catch {}
  return { code, out, err, json };
}

/** `records save` of `file` (in the config folder) as `model`'s record `naturalKey`. */
const save = (model: string, naturalKey: string, file: string) => [
  'records',
  'save',
  '--model',
  model,
  '--natural-key',
  naturalKey,
  '--file',
  file,
  '--dir',
  dir,
];

const member = (role: string) => memberKey(server, p, role);

/** `svc api-keys create` as the owner in the pinned config folder, with --json. */
const pinnedKey = (key: Parameters<typeof cliCreateKey>[2]) =>
  cliCreateKey(server, p.ownerKey, key, '--dir', dir, '--json');

beforeAll(async () => {
  server = await startTestServer();
  p = await bootstrapProject(server, 'pinned');
  // A config folder pinned to the project, with one model.
  dir = folder({
    'svc.config.json': minimal(p, {
      models: [
        {
          key: 'page',
          name: 'Page',
          fields: [
            { key: 'title', type: 'text', required: true },
            { key: 'secret', type: 'text', access: { write: ['service'] } },
          ],
        },
      ],
    }),
  });
  const pushed = await cli(server, p.ownerKey, 'push', '--dir', dir, '--json');
  if (pushed.code !== 0) throw new Error(pushed.err);
});
afterAll(() => server.stop());

describe("project-scoped commands use the folder's pinned project", () => {
  test('api-keys create without --tenant or --project makes a key of the pinned project', async () => {
    const r = await pinnedKey({ name: 'site', type: 'public', scopes: 'records:read' });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const who = await fetch(`${server.apiUrl}/v1/whoami`, { headers: { 'x-api-key': r.json.key } });
    expect(((await who.json()) as { projectId: string }).projectId).toBe(p.projectId);
    const listed = await cli(server, p.ownerKey, 'api-keys', 'list', '--dir', dir, '--json');
    expect(listed.json.keys.map((k: { id: string }) => k.id)).toContain(r.json.id);
    expect(listed.json.keys.every((k: { projectId: string | null }) => k.projectId === p.projectId)).toBe(true);
  });

  test('outside a config folder, a project-bound key still needs a project', async () => {
    const r = await cliCreateKey(
      server,
      p.ownerKey,
      { name: 'site', type: 'public', scopes: 'records:read' },
      '--dir',
      folder({}),
    );
    expect(r.code).toBe(1);
    expect(r.err).toContain('no project: pass --project');
  });
});

describe('svc records save|publish as the calling member', () => {
  test('an owner, an admin and an editor save (create, then update by natural key) and publish with their control key', async () => {
    const file = join(dir, 'home.json');
    for (const [i, key] of [p.ownerKey, await member('admin'), await member('editor')].entries()) {
      writeFileSync(file, JSON.stringify({ title: `Home ${i}` }));
      const saved = await run({ SVC_TOKEN: key }, ...save('page', `home-${i}`, 'home.json'), '--json');
      expect(saved.err).toBe('');
      expect(saved.json).toEqual({ _id: expect.stringMatching(/^rec_/) });
      writeFileSync(file, JSON.stringify({ title: `Home ${i} again` }));
      const again = await run(
        {},
        'records',
        'save',
        '--token',
        key,
        '--model',
        'page',
        '--natural-key',
        `home-${i}`,
        '--file',
        'home.json',
        '--dir',
        dir,
        '--json',
      );
      expect(again.json._id).toBe(saved.json._id);
      const pub = await run(
        { SVC_TOKEN: key },
        'records',
        'publish',
        '--model',
        'page',
        '--id',
        saved.json._id,
        '--dir',
        dir,
        '--json',
      );
      expect(pub.json).toEqual({ _id: saved.json._id, published: true });
    }
    const pk = await pinnedKey({ name: 'read', type: 'public', scopes: 'records:read' });
    const res = await gqlAt(server.apiUrl, pk.json.key, '{ page(naturalKey: "home-2") { title } }');
    expect(res.data.page.title).toBe('Home 2 again');
  });

  test('a viewer may not save or publish; field access rules hold for members', async () => {
    const viewer = await member('viewer');
    writeFileSync(join(dir, 'v.json'), JSON.stringify({ title: 'V' }));
    const r = await run({ SVC_TOKEN: viewer }, ...save('page', 'v', 'v.json'));
    expect(r.code).toBe(1);
    expect(r.err).toContain('403 PERMISSION_DENIED');
    writeFileSync(join(dir, 's.json'), JSON.stringify({ title: 'S', secret: 'x' }));
    const s = await run({ SVC_TOKEN: p.ownerKey }, ...save('page', 's', 's.json'));
    expect(s.code).toBe(1);
    expect(s.err).toContain('403 PERMISSION_DENIED');
  });

  test('bad data is one line naming the field; an unknown model is named', async () => {
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ title: 5 }));
    const r = await run({ SVC_TOKEN: p.ownerKey }, ...save('page', 'bad', 'bad.json'));
    expect(r.code).toBe(1);
    expect(r.err).toContain('400 BAD_USER_INPUT');
    expect(r.err).toContain('title');
    const m = await run({ SVC_TOKEN: p.ownerKey }, ...save('nope', 'bad', 'bad.json'));
    expect(m.err).toContain('model "nope" is not a model of this project');
  });

  test('a secret key in SVC_API_KEY is used even when SVC_TOKEN holds a control key', async () => {
    const sk = await pinnedKey({
      name: 'cli',
      type: 'secret',
      scopes: 'records:read,records:write,records:publish,drafts:read',
    });
    writeFileSync(join(dir, 'k.json'), JSON.stringify({ title: 'K' }));
    const r = await run({ SVC_TOKEN: p.ownerKey, SVC_API_KEY: sk.json.key }, ...save('page', 'k', 'k.json'), '--json');
    expect(r.err).toBe('');
    const rows = await server.svc.sql`select created_by from records where id = ${r.json._id}`;
    expect(rows[0]!.created_by).toBe(sk.json.id);
  });
});
