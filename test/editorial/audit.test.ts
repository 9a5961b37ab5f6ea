import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cli, type TestServer } from '../support/server.ts';
import { gqlProject, startSecretProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { MODELS, editor, roomOf, synced } from '../collab/support.ts';
import { purgeAudit } from '../../src/editorial/audit.ts';

let server: TestServer;
let p: GqlProject;
let key: string;
let keyId: string;

beforeAll(async () => {
  ({ server, p, sk: key } = await startSecretProject(MODELS, 'audit'));
  keyId = (
    (await (await fetch(`${server.apiUrl}/v1/whoami`, { headers: { 'x-api-key': key } })).json()) as { keyId: string }
  ).keyId;
}, 60_000);
afterAll(() => server.stop(), 60_000);

async function audit(token: string, params: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(
    `${server.apiUrl}/v1/control/audit?${new URLSearchParams({ projectId: p.projectId, ...params })}`,
    { headers: { authorization: `Bearer ${token}` } },
  );
  return { status: res.status, body: await res.json() };
}

async function ok(
  query: string,
  variables: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<any> {
  const r = await p.gql(key, query, variables, headers);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
}

describe('audit log', () => {
  test('GraphQL writes: who, what, when, from where, request id — in the write’s transaction', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const id = (
      await ok(
        'mutation{ createArticle(data:{ title:"Audited" }){ _id } }',
        {},
        { 'x-request-id': 'req-create-1', 'user-agent': 'audit-test/1.0' },
      )
    ).createArticle._id;
    await ok('mutation($id:ID!){ publishArticleVersion(_id:$id){ _id } }', { id });
    await ok('mutation($id:ID!){ restoreArticleVersion(_id:$id, version:1){ _id } }', { id });
    await ok('mutation($id:ID!,$at:DateTime!){ scheduleArticleUnpublish(_id:$id, at:$at){ id } }', {
      id,
      at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    const r = await audit(p.ownerKey, { since });
    expect(r.status).toBe(200);
    const mine = r.body.entries.filter((e: any) => e.target.id === id).reverse();
    expect(mine.map((e: any) => e.action)).toEqual([
      'record.created',
      'record.published',
      'record.updated',
      'schedule.unpublish',
    ]);
    expect(mine[0]).toMatchObject({
      actor: { kind: 'apiKey', id: keyId },
      target: { kind: 'record', id },
      projectId: p.projectId,
      requestId: 'req-create-1',
      ip: '127.0.0.1',
      userAgent: 'audit-test/1.0',
    });
    expect(Date.parse(mine[0].at)).toBeGreaterThan(Date.parse(since));
    // A request without x-request-id gets one of its own.
    expect(mine[1].requestId).toMatch(/^[0-9a-f-]{36}$/);
    // A failed write leaves nothing.
    const bad = await p.gql(key, 'mutation{ updateArticle(_id:"rec_nope", data:{ title:"x" }){ _id } }');
    expect(bad.body.errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await audit(p.ownerKey, { since })).body.entries.some((e: any) => e.target.id === 'rec_nope')).toBe(false);
  }, 30_000);

  test('control plane and CLI changes, never a secret’s value; svc audit prints them', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    const SECRET = 'sup3r-s3cret-value-never-logged';
    const made = await cli(
      server,
      p.ownerKey,
      'api-keys',
      'create',
      '--name',
      'audited',
      '--type',
      'secret',
      '--project',
      p.projectId,
      '--scopes',
      'records:read',
      '--json',
    );
    expect(made.code).toBe(0);
    const pushed = await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/secrets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ secrets: [{ ownerKind: 'project', label: 'stripe', value: SECRET }] }),
    });
    expect(pushed.status).toBeLessThan(300);
    const put = await p.gql(
      await p.key('sk', ['secrets:put.project']),
      'mutation($v:String!){ putSecret(label:"mail", value:$v){ label } }',
      { v: SECRET },
    );
    expect(put.body.errors).toBeUndefined();
    // Control-plane entries are written right after the answer: poll briefly.
    let out = await cli(server, p.ownerKey, 'audit', '--project', p.projectId, '--since', since, '--json');
    await eventually(async () => {
      out = await cli(server, p.ownerKey, 'audit', '--project', p.projectId, '--since', since, '--json');
      return (
        out.json.entries.some((e: any) => e.action === 'POST /v1/control/api-keys/') &&
        out.json.entries.some((e: any) => e.action === 'POST /v1/control/projects/:id/secrets')
      );
    }, 10_000);
    expect(out.code).toBe(0);
    const actions = out.json.entries.map((e: any) => e.action);
    expect(actions).toContain('POST /v1/control/api-keys/');
    expect(actions).toContain('POST /v1/control/projects/:id/secrets');
    expect(actions).toContain('graphql.putSecret');
    const keyEntry = out.json.entries.find((e: any) => e.action === 'POST /v1/control/api-keys/');
    expect(keyEntry.actor.kind).toBe('member');
    expect(keyEntry.target.id).toBe(made.json.id ?? made.json.keyId);
    expect(out.json.entries.find((e: any) => e.action === 'graphql.putSecret').target).toEqual({
      kind: 'mutation',
      id: 'mail',
    });
    const everything = await server.svc.sql`select * from audit_log`;
    expect(JSON.stringify(everything)).not.toContain(SECRET);
    const text = await cli(server, p.ownerKey, 'audit', '--project', p.projectId, '--since', since);
    expect(text.out).toContain('graphql.putSecret');
    expect((await cli(server, p.ownerKey, 'audit', '--since', 'yesterday-ish')).code).not.toBe(0);
  }, 30_000);

  test('collaboration saves are logged as the editor', async () => {
    const id = (await ok('mutation{ createArticle(data:{ title:"Room" }){ _id } }')).createArticle._id;
    const e = editor(server.gatewayUrl, roomOf('article', id), { apiKey: key });
    try {
      await synced(e);
      e.text('title').insert(4, ' edited');
      await eventually(async () => {
        await ok('mutation($r:String!){ saveCollabDraft(roomName:$r){ _id } }', { r: roomOf('article', id) });
        const entries = (await audit(p.ownerKey)).body.entries;
        return entries.some((x: any) => x.target.id === id && x.action === 'record.saved' && x.actor.id === keyId);
      }, 10_000);
      const entries = (await audit(p.ownerKey)).body.entries.filter((x: any) => x.target.id === id);
      // The save's own entry, not a second graphql.saveCollabDraft one.
      expect(entries.some((x: any) => x.action === 'graphql.saveCollabDraft')).toBe(false);
    } finally {
      e.close();
    }
  }, 30_000);

  test('owners and admins only; another tenant’s project is not found; bad parameters are 400', async () => {
    const editorKey = await cli(
      server,
      p.ownerKey,
      'members',
      'add',
      '--email',
      'ed@example.com',
      '--role',
      'editor',
      '--json',
    );
    expect(editorKey.code).toBe(0);
    const denied = await audit(editorKey.json.controlKey);
    expect(denied.status).toBe(403);
    expect(denied.body.error).toBe('PERMISSION_DENIED');
    const other = await gqlProject(server, MODELS, 'audit-other');
    const cross = await fetch(`${server.apiUrl}/v1/control/audit?projectId=${p.projectId}`, {
      headers: { authorization: `Bearer ${other.ownerKey}` },
    });
    expect(cross.status).toBe(404);
    expect((await audit(p.ownerKey, { since: 'not-a-date' })).status).toBe(400);
    expect((await audit(p.ownerKey, { first: '0' })).status).toBe(400);
    expect((await audit(p.ownerKey, { first: '100000' })).status).toBe(400);
    expect((await audit(p.ownerKey, { after: 'abc' })).status).toBe(400);
    expect((await fetch(`${server.apiUrl}/v1/control/audit`)).status).toBe(401);
    // Root sees any project's; pages go back in time without repeats.
    const seen = new Set<string>();
    let after: string | null = null;
    for (let i = 0; i < 50; i++) {
      const page: any = (await audit(server.rootToken, { first: '3', ...(after ? { after } : {}) })).body;
      for (const e of page.entries) {
        expect(seen.has(e.id)).toBe(false);
        seen.add(e.id);
      }
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    expect(seen.size).toBeGreaterThan(5);
    // Filter by actor.
    const byKey = (await audit(p.ownerKey, { actor: keyId })).body.entries;
    expect(byKey.length).toBeGreaterThan(0);
    expect(byKey.every((e: any) => e.actor.id === keyId)).toBe(true);
  }, 30_000);

  test('retention: a project setting (default 90 days), purged by the scheduler', async () => {
    /** Pushes the project's config with `auditRetentionDays` set to `days`, through the control API. */
    const pushRetention = (days: number) =>
      fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/config`, {
        method: 'POST',
        headers: { authorization: `Bearer ${p.ownerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          config: {
            key: 'audit',
            name: 'audit',
            models: MODELS,
            project: { id: p.projectId, tenantId: p.tenantId, settings: { auditRetentionDays: days } },
          },
        }),
      });
    const bad = await pushRetention(0);
    expect(JSON.stringify(await bad.json())).toContain('auditRetentionDays');
    const good = await pushRetention(10);
    expect(good.status).toBeLessThan(300);
    const other = await gqlProject(server, MODELS, 'audit-retention-default');
    const sql = server.svc.sql;
    await sql`insert into audit_log (project_id, actor_kind, action, target_kind, at) values
      (${p.projectId}, 'root', 'old.11', 'x', now() - interval '11 days'),
      (${p.projectId}, 'root', 'old.9', 'x', now() - interval '9 days'),
      (${other.projectId}, 'root', 'old.11', 'x', now() - interval '11 days'),
      (${other.projectId}, 'root', 'old.91', 'x', now() - interval '91 days')`;
    await purgeAudit(sql);
    const left = await sql<
      { project_id: string; action: string }[]
    >`select project_id, action from audit_log where action like 'old.%' order by project_id, action`;
    expect(left.map((r) => `${r.project_id === p.projectId ? 'p' : 'o'}:${r.action}`).sort()).toEqual([
      'o:old.11',
      'p:old.9',
    ]);
  }, 30_000);
});
