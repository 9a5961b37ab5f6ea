import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { spawnBeside } from '../support/process.ts';
import { opsProject, type OpsProject } from '../operations/support.ts';
import { folder } from '../config/support.ts';

/**
 * Secrets over GraphQL (issue 19): scopes, encryption at rest with the `svc secrets push`
 * envelope, an audit row per access, never cached; across processes; key rotation.
 */
let server: TestServer;
let p: OpsProject;
const procs: Subprocess[] = [];

beforeAll(async () => {
  server = await startTestServer();
  p = await opsProject(server, 'secrets');
}, 30_000);

afterAll(async () => {
  for (const proc of procs) proc.kill('SIGKILL');
  await server.stop();
});

async function post(
  apiUrl: string,
  key: string,
  query: string,
  variables?: Record<string, unknown>,
): Promise<{ status: number; cache: string | null; body: any }> {
  const res = await fetch(`${apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, cache: res.headers.get('cache-control'), body: await res.json() };
}

const PUT = 'mutation($l: String!, $v: String!) { putSecret(label: $l, value: $v) { label created updatedAt } }';
const GET = 'query($l: String!) { getSecret(label: $l) }';
const ALL = ['secrets:read.project', 'secrets:put.project', 'secrets:delete.project'];

async function spawn(env: Record<string, string>): Promise<string> {
  const { proc, url } = await spawnBeside(server, env);
  procs.push(proc);
  return url;
}

describe('secrets over GraphQL', () => {
  test('put, get, replace and delete; values encrypted at rest; every access audited and never cached', async () => {
    const key = await p.key(ALL);
    const put = await post(server.apiUrl, key, PUT, { l: 'stripeKey', v: 'sk_live_PLAINTEXT_42' });
    expect(put.body.data.putSecret).toMatchObject({ label: 'stripeKey', created: true });
    expect(put.cache).toBe('no-store');
    const again = await post(server.apiUrl, key, PUT, { l: 'stripeKey', v: 'sk_live_PLAINTEXT_43' });
    expect(again.body.data.putSecret.created).toBe(false);

    for (let i = 0; i < 3; i++) {
      const got = await post(server.apiUrl, key, GET, { l: 'stripeKey' });
      expect(got.body).toEqual({ data: { getSecret: 'sk_live_PLAINTEXT_43' } });
      expect(got.cache).toBe('no-store');
    }
    expect((await post(server.apiUrl, key, GET, { l: 'nothingHere' })).body.data.getSecret).toBeNull();

    const dump = JSON.stringify(
      await server.svc
        .sql`select encode(ciphertext, 'escape') as c, key_id from secrets where project_id = ${p.projectId}`,
    );
    expect(dump).not.toContain('PLAINTEXT');
    expect(dump).toContain('key_id');

    // Three reads hit the database three times: one audit row each, none answered from a cache.
    const audit = await post(
      server.apiUrl,
      key,
      '{ secretAudit(label: "stripeKey") { label action apiKeyId found at } }',
    );
    const actions = audit.body.data.secretAudit.map((a: any) => `${a.action}:${a.found}`);
    expect(actions).toEqual(['read:true', 'read:true', 'read:true', 'put:true', 'put:false']);
    expect(audit.body.data.secretAudit[0].apiKeyId).toMatch(/\S/);
    expect(JSON.stringify(audit.body)).not.toContain('PLAINTEXT');

    const del = await post(server.apiUrl, key, 'mutation { deleteSecret(label: "stripeKey") }');
    expect(del.body.data.deleteSecret).toBe(true);
    expect(
      (await post(server.apiUrl, key, 'mutation { deleteSecret(label: "stripeKey") }')).body.data.deleteSecret,
    ).toBe(false);
    expect((await post(server.apiUrl, key, GET, { l: 'stripeKey' })).body.data.getSecret).toBeNull();
    const [n] = await server.svc
      .sql`select count(*)::int as n from secret_audit where project_id = ${p.projectId} and label = 'stripeKey' and action = 'delete'`;
    expect(n!.n).toBe(2);
  });

  test('each field needs its own scope; public keys do not see the family', async () => {
    const readOnly = await p.key(['secrets:read.project']);
    const put = await post(server.apiUrl, readOnly, PUT, { l: 'x', v: 'y' });
    expect(put.body.errors[0].message).toBe('missing required scope: secrets:put.project');
    expect(put.body.errors[0].extensions?.code).toBeUndefined();
    const del = await post(server.apiUrl, readOnly, 'mutation { deleteSecret(label: "x") }');
    expect(del.body.errors[0].message).toBe('missing required scope: secrets:delete.project');
    const none = await p.key(['records:read']);
    expect((await post(server.apiUrl, none, GET, { l: 'x' })).body.errors[0].message).toBe(
      'missing required scope: secrets:read.project',
    );
    expect((await post(server.apiUrl, none, '{ secretAudit { label } }')).body.errors[0].message).toBe(
      'missing required scope: secrets:read.project',
    );
    const pub = await p.key(['records:read'], 'pk');
    const r = await post(server.apiUrl, pub, GET, { l: 'x' });
    expect(r.body.errors[0].message).toStartWith('Cannot query field "getSecret"');
    const [n] = await server.svc
      .sql`select count(*)::int as n from secrets where project_id = ${p.projectId} and label = 'x'`;
    expect(n!.n).toBe(0);
  });

  test('odd labels, a 1 MB value and a NUL are refused with nothing stored', async () => {
    const key = await p.key(ALL);
    for (const label of [
      '',
      '1abc',
      'has space',
      'dash-ed',
      'ünïcode',
      'a'.repeat(129),
      "x'; drop table secrets; --",
    ]) {
      const r = await post(server.apiUrl, key, PUT, { l: label, v: 'v' });
      expect(`${label}: ${r.status} ${r.body.errors?.[0]?.extensions?.code}`).toBe(`${label}: 200 BAD_USER_INPUT`);
      expect(r.body.errors[0].message).toContain('label must start with a letter');
    }
    const big = await post(server.apiUrl, key, PUT, { l: 'big', v: 'x'.repeat(200 * 1024) });
    expect(big.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(big.body.errors[0].message).toContain('larger than 64 KB');
    const huge = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ query: PUT, variables: { l: 'huge', v: 'x'.repeat(1024 * 1024) } }),
    });
    expect(huge.status).toBe(413);
    const hugeBody = (await huge.json()) as any;
    expect(hugeBody.errors?.[0]?.extensions?.code ?? hugeBody.error).toBe('PAYLOAD_TOO_LARGE');
    const nul = await post(server.apiUrl, key, PUT, { l: 'nul', v: 'a\u0000b' });
    expect(nul.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    const [n] = await server.svc.sql`select count(*)::int as n from secrets where project_id = ${p.projectId}`;
    expect(n!.n).toBe(0);
    const [a] = await server.svc
      .sql`select count(*)::int as n from secret_audit where project_id = ${p.projectId} and action = 'put' and label <> 'stripeKey'`;
    expect(a!.n).toBe(0);
  });

  test('a value pushed with `svc secrets push` is read back by getSecret (one envelope)', async () => {
    const dir = folder({
      'svc.config.json': { key: 'site', name: 'Site' },
      'svc.secrets.json': { secrets: [{ ownerKind: 'project', label: 'mailKey' }] },
      'svc.secrets.local.json': { mailKey: 'mail-PLAINTEXT-7' },
    });
    const pushed = await cli(server, p.ownerKey, 'secrets', 'push', '--dir', dir, '--project', p.projectId, '--json');
    expect(pushed.code).toBe(0);
    const key = await p.key(ALL);
    expect((await post(server.apiUrl, key, GET, { l: 'mailKey' })).body.data.getSecret).toBe('mail-PLAINTEXT-7');
  });

  test('no value reaches the logs: request lines on stdout, errors on stderr', async () => {
    const key = await p.key(ALL);
    const { proc, url } = await spawnBeside(server, { SVC_LOG: 'json' });
    procs.push(proc);
    const secret = 'logcheck-PLAINTEXT-9f3a';
    await post(url, key, PUT, { l: 'logged', v: secret });
    expect((await post(url, key, GET, { l: 'logged' })).body.data.getSecret).toBe(secret);
    // Refused writes echo nothing of the value either (too large, NUL, bad label).
    expect((await post(url, key, PUT, { l: 'logged', v: secret.repeat(3000) })).body.errors[0].extensions.code).toBe(
      'BAD_USER_INPUT',
    );
    expect((await post(url, key, PUT, { l: 'logged', v: `${secret}\u0000` })).body.errors[0].extensions.code).toBe(
      'BAD_USER_INPUT',
    );
    expect((await post(url, key, PUT, { l: 'bad label', v: secret })).body.errors[0].extensions.code).toBe(
      'BAD_USER_INPUT',
    );
    proc.kill('SIGTERM');
    await proc.exited;
    const rest = async (stream: ReadableStream<Uint8Array>) => {
      const reader = stream.getReader();
      let text = '';
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
      return text;
    };
    const [out, err] = await Promise.all([rest(proc.stdout), rest(proc.stderr)]);
    // The log was written (five GraphQL requests), so its silence about the value means something.
    expect(out.split('\n').filter((l) => l.includes('"path":"/graphql"')).length).toBeGreaterThanOrEqual(5);
    expect(out).not.toContain('PLAINTEXT');
    expect(err).not.toContain('PLAINTEXT');
  }, 60_000);

  test('two processes: a secret put through one is read through the other; a rotated key re-seals it', async () => {
    const key = await p.key(ALL);
    const other = await spawn({});
    await post(server.apiUrl, key, PUT, { l: 'crossKey', v: 'cross-PLAINTEXT-1' });
    expect((await post(other, key, GET, { l: 'crossKey' })).body.data.getSecret).toBe('cross-PLAINTEXT-1');
    await post(other, key, PUT, { l: 'crossKey', v: 'cross-PLAINTEXT-2' });
    expect((await post(server.apiUrl, key, GET, { l: 'crossKey' })).body.data.getSecret).toBe('cross-PLAINTEXT-2');

    // Rotation: a process with a new SVC_SECRETS_KEY still opens rows sealed by the generated key
    // (kept as a previous key) and re-seals each one it reads under the new key.
    const [before] = await server.svc
      .sql`select key_id from secrets where project_id = ${p.projectId} and label = 'crossKey'`;
    const rotated = await spawn({ SVC_SECRETS_KEY: 'a-new-deployment-key' });
    expect((await post(rotated, key, GET, { l: 'crossKey' })).body.data.getSecret).toBe('cross-PLAINTEXT-2');
    const [after] = await server.svc
      .sql`select key_id from secrets where project_id = ${p.projectId} and label = 'crossKey'`;
    expect(after!.key_id).not.toBe(before!.key_id);
    expect((await post(rotated, key, GET, { l: 'crossKey' })).body.data.getSecret).toBe('cross-PLAINTEXT-2');
  }, 60_000);
});
