import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { listOutbox } from '../../src/identity/mailer.ts';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { addMember, PASSWORD, studioProject, welcome, type StudioProject } from './support.ts';

/**
 * Member sign-in and the session credential over HTTP, on two processes sharing one PostgreSQL:
 * a session opened on one works on the other, and a sign-out on one ends it on both.
 */
let a: TestServer;
let b: TestServer;
let project: StudioProject;

beforeAll(async () => {
  a = await startTestServer();
  b = await startTestServer({ DATABASE_URL: a.databaseUrl, SVC_DATA_DIR: a.dataDir, SVC_ROOT_TOKEN: a.rootToken });
  project = await studioProject(a);
}, 60_000);

afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const gql = (server: TestServer, s: { cookie: string; csrf?: string }, query: string, variables?: unknown) =>
  fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      cookie: s.cookie,
      'x-project-id': project.projectId,
      ...(s.csrf ? { 'x-csrf-token': s.csrf } : {}),
    },
    body: JSON.stringify({ query, variables }),
  });

describe('member sign-in', () => {
  test('svc members add prints a first-login link; it signs in once, with a hardened cookie', async () => {
    const text = await cli(
      a,
      project.ownerKey,
      'members',
      'add',
      '--email',
      'first@acme.test',
      '--role',
      'editor',
      '--project',
      project.projectId,
    );
    expect(text.code).toBe(0);
    expect(text.out).toMatch(
      /first sign-in to the Studio \(single use, 7 days\): http:\/\/127\.0\.0\.1:\d+\/studio\/welcome#token=mi_[0-9a-f]{64}/,
    );
    const link = await addMember(a, project.ownerKey, 'ed@acme.test', 'editor', project.projectId);
    const token = new URL(link).hash.replace('#token=', '');
    const weak = await fetch(`${a.apiUrl}/studio/api/welcome`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token, password: 'short' }),
    });
    expect(weak.status).toBe(400);
    const res = await fetch(`${a.apiUrl}/studio/api/welcome`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token, password: PASSWORD }),
    });
    expect(res.status).toBe(200);
    const cookie = res.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^svc_session=ms_[0-9a-f]{64}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/);
    const again = await fetch(`${a.apiUrl}/studio/api/welcome`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token, password: PASSWORD }),
    });
    expect(again.status).toBe(401);
  });

  test('a tenant owner signs in with a one-time code and sees every project of the tenant, nothing of another', async () => {
    const t = await cli(
      a,
      a.rootToken,
      'tenants',
      'create',
      '--name',
      'Other Co',
      '--owner-email',
      'boss@other.test',
      '--json',
    );
    const p = await cli(a, t.json.controlKey, 'projects', 'create', '--name', 'Shop', '--json');
    await fetch(`${a.apiUrl}/studio/api/code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'boss@other.test' }),
    });
    const code = /(\d{6})/.exec(listOutbox(a.dataDir, { to: 'boss@other.test' })[0]!.subject)![1]!;
    const res = await fetch(`${b.apiUrl}/studio/api/login-code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'boss@other.test', code }),
    });
    const s = {
      cookie: res.headers.get('set-cookie')!.split(';')[0]!,
      csrf: ((await res.json()) as { csrf: string }).csrf,
    };
    const me = (await (await fetch(`${b.apiUrl}/studio/api/session`, { headers: { cookie: s.cookie } })).json()) as any;
    expect(me).toMatchObject({
      email: 'boss@other.test',
      tenant: { id: t.json.tenantId, name: 'Other Co' },
      projects: [{ id: p.json.projectId, name: 'Shop', role: 'owner' }],
    });
    // Nothing of the first tenant is visible to this session.
    const other = await fetch(`${a.apiUrl}/v1/control/projects/${project.projectId}/config`, {
      headers: { cookie: s.cookie, 'x-csrf-token': s.csrf },
    });
    expect(other.status).toBe(404);
  });

  test('passwords: a wrong one is refused like an unknown email; sign-in posts must be JSON', async () => {
    const bad = await fetch(`${a.apiUrl}/studio/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ed@acme.test', password: 'not the password at all' }),
    });
    expect(bad.status).toBe(401);
    expect(await bad.json()).toEqual({ error: 'UNAUTHENTICATED', message: 'Invalid email or password' });
    const unknown = await fetch(`${a.apiUrl}/studio/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'nobody@acme.test', password: PASSWORD }),
    });
    expect(await unknown.json()).toEqual({ error: 'UNAUTHENTICATED', message: 'Invalid email or password' });
    const form = await fetch(`${a.apiUrl}/studio/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `email=ed%40acme.test&password=${encodeURIComponent(PASSWORD)}`,
    });
    expect(form.status).toBe(400);
    const ok = await fetch(`${b.apiUrl}/studio/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ED@acme.test', password: PASSWORD }),
    });
    expect(ok.status).toBe(200);
    // Four password checks (scrypt in a worker): over 5 s on a loaded 2-core box.
  }, 30_000);

  test('a one-time code by mail signs in once', async () => {
    const sent = await fetch(`${a.apiUrl}/studio/api/code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ed@acme.test' }),
    });
    expect(await sent.json()).toEqual({ sent: true });
    const stranger = await fetch(`${a.apiUrl}/studio/api/code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'stranger@acme.test' }),
    });
    expect(await stranger.json()).toEqual({ sent: true });
    const mail = listOutbox(a.dataDir, { to: 'ed@acme.test' }).find((m) =>
      m.subject.startsWith('Your svc Studio sign-in code'),
    )!;
    const code = /(\d{6})/.exec(mail.subject)![1]!;
    expect(listOutbox(a.dataDir, { to: 'stranger@acme.test' })).toEqual([]);
    const wrong = await fetch(`${b.apiUrl}/studio/api/login-code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ed@acme.test', code: code === '000000' ? '111111' : '000000' }),
    });
    expect(wrong.status).toBe(401);
    const ok = await fetch(`${b.apiUrl}/studio/api/login-code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ed@acme.test', code }),
    });
    expect(ok.status).toBe(200);
    const reused = await fetch(`${b.apiUrl}/studio/api/login-code`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ed@acme.test', code }),
    });
    expect(reused.status).toBe(401);
  });
});

describe('the session credential', () => {
  test('works on both processes for GraphQL and the control plane, needs its CSRF token, and writes as the member', async () => {
    const s = await welcome(a, await addMember(a, project.ownerKey, 'writer@acme.test', 'editor', project.projectId));
    const me = (await (await fetch(`${b.apiUrl}/studio/api/session`, { headers: { cookie: s.cookie } })).json()) as any;
    expect(me).toMatchObject({
      signedIn: true,
      email: 'writer@acme.test',
      csrf: s.csrf,
      projects: [{ id: project.projectId, role: 'editor' }],
    });

    const noCsrf = await gql(b, { cookie: s.cookie }, '{ articles(first: 1) { totalCount } }');
    expect(noCsrf.status).toBe(403);
    expect(((await noCsrf.json()) as any).errors[0].extensions.code).toBe('PERMISSION_DENIED');
    const forged = await gql(b, { cookie: s.cookie, csrf: 'x'.repeat(43) }, '{ articles(first: 1) { totalCount } }');
    expect(forged.status).toBe(403);

    const created = (await (
      await gql(b, s, 'mutation { createArticle(data: { title: "By a member" }) { _id } }')
    ).json()) as any;
    const id = created.data.createArticle._id as string;
    const versions = (await (
      await gql(a, s, 'query($id: ID!) { recordVersions(_id: $id) { action userId } }', { id })
    ).json()) as any;
    const whoami = (await (
      await fetch(`${a.apiUrl}/v1/control/whoami`, {
        headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, 'x-project-id': project.projectId },
      })
    ).json()) as any;
    expect(whoami).toMatchObject({
      kind: 'member',
      role: 'editor',
      email: 'writer@acme.test',
      projectId: project.projectId,
    });
    expect(versions.data.recordVersions).toEqual([{ action: 'created', userId: whoami.memberId }]);

    // Editors may not manage keys: the control plane applies the member's role.
    const keys = await fetch(`${b.apiUrl}/v1/control/api-keys?project=${project.projectId}`, {
      headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, 'x-project-id': project.projectId },
    });
    expect(keys.status).toBe(403);
    // Another tenant's project, or none, is refused.
    const other = await fetch(`${a.apiUrl}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        cookie: s.cookie,
        'x-csrf-token': s.csrf,
        'x-project-id': 'prj_other',
      },
      body: '{"query":"{ __typename }"}',
    });
    expect(other.status).toBe(404);
  });

  test('viewers read drafts and join rooms read-only; their writes are refused', async () => {
    const v = await welcome(a, await addMember(a, project.ownerKey, 'viewer@acme.test', 'viewer', project.projectId));
    const list = (await (
      await gql(a, v, '{ articles(first: 5, preview: true) { totalCount edges { node { _id } } } }')
    ).json()) as any;
    expect(list.data.articles.totalCount).toBeGreaterThan(0);
    const recordId = list.data.articles.edges[0].node._id;
    const info = await fetch(`${a.apiUrl}/collab/info?recordId=${recordId}&modelKey=article`, {
      headers: { cookie: v.cookie, 'x-csrf-token': v.csrf, 'x-project-id': project.projectId },
    });
    // A viewer may join read-only only (readOnly=1, as the Studio does), not as an editor.
    expect(await info.json()).toMatchObject({
      enabled: false,
      readOnly: true,
      roomName: `article:${recordId}:default`,
      wsUrl: a.gatewayUrl.replace(/^http/, 'ws'),
    });
    const write = (await (await gql(a, v, 'mutation { createArticle(data: { title: "no" }) { _id } }')).json()) as any;
    expect(write.errors[0].message).toBe('missing required scope: records:write');
    const upload = new FormData();
    upload.append('file', new Blob(['hello']), 'a.txt');
    const up = await fetch(`${a.apiUrl}/api/files/upload`, {
      method: 'POST',
      headers: { cookie: v.cookie, 'x-csrf-token': v.csrf, 'x-project-id': project.projectId },
      body: upload,
    });
    expect(up.status).toBe(403);
  });

  test('signing out on one process ends the session on the other', async () => {
    const s = await welcome(a, await addMember(a, project.ownerKey, 'leaver@acme.test', 'editor', project.projectId));
    expect((await gql(b, s, '{ articles(first: 1) { totalCount } }')).status).toBe(200);
    const noCsrf = await fetch(`${a.apiUrl}/studio/api/logout`, { method: 'POST', headers: { cookie: s.cookie } });
    expect(noCsrf.status).toBe(403);
    const out = await fetch(`${a.apiUrl}/studio/api/logout`, {
      method: 'POST',
      headers: { cookie: s.cookie, 'x-csrf-token': s.csrf },
    });
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    const after = await gql(b, s, '{ articles(first: 1) { totalCount } }');
    expect(after.status).toBe(401);
  });
});

describe('SVC_STUDIO=off', () => {
  test('no /studio and no first-login link', async () => {
    const off = await startTestServer({ SVC_STUDIO: 'off' });
    try {
      expect((await fetch(`${off.apiUrl}/studio/`)).status).toBe(404);
      const t = await cli(off, off.rootToken, 'tenants', 'create', '--name', 'x', '--json');
      const m = await cli(off, t.json.controlKey, 'members', 'add', '--email', 'e@x.test', '--role', 'admin', '--json');
      expect(m.json.loginUrl).toBeUndefined();
    } finally {
      await off.stop();
    }
  }, 30_000);
});
