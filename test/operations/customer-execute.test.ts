import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { spawnServiceBeside } from '../support/process.ts';
import { eventually } from '../support/eventually.ts';
import { sse } from '../realtime/support.ts';
import { endpoint, opsProject, waitStatus, type Endpoint, type OpsProject } from './support.ts';

// argon2id logins are slow on a loaded box: never a reason to fail.
setDefaultTimeout(60_000);

/**
 * Who sees which execute fields (spec "Per-operation scopes", customer roles rule 2–3): a key
 * that may execute nothing sees no execute field, generic or typed; a customer's role (never
 * the public key, never `self:*`) brings execute fields into the schema of key plus token.
 */
let server: TestServer;
let ep: Endpoint;
let p: OpsProject;
let sk: string;

beforeAll(async () => {
  server = await startTestServer({ SVC_OPERATIONS_POLL_MS: '50' });
  ep = endpoint({
    '/ping': (_r, body) => Response.json({ pong: body.input ?? null }),
    '/other': () => Response.json({ ok: true }),
    // Answers later, through the callback: the execution runs while a subscriber listens.
    '/slow': () => new Response(null, { status: 202 }),
  });
  p = await opsProject(server, 'cust-exec');
  await p.push({
    operationBaseUrl: ep.url,
    operations: [
      { key: 'ping', endpoint: '/ping' },
      { key: 'other', endpoint: '/other' },
      { key: 'slow', endpoint: '/slow', timeoutSeconds: 60 },
    ],
    models: [
      { key: 'note', name: 'Note', fields: [{ key: 'body', type: 'text', access: { write: ['self', 'service'] } }] },
    ],
  });
  sk = await p.key(['operations:execute', 'operations:read']);
}, 60_000);

afterAll(async () => {
  ep.stop();
  await server.stop();
});

async function mutationNames(key: string, headers: Record<string, string> = {}): Promise<string[]> {
  const res = await fetch(`${server.apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, ...headers },
    body: JSON.stringify({ query: '{ __schema { mutationType { fields { name } } } }' }),
  });
  const body = (await res.json()) as any;
  return (body.data.__schema.mutationType?.fields ?? []).map((f: { name: string }) => f.name);
}

describe('keys that may execute nothing', () => {
  test('a secret key without any operations:execute scope sees neither executeOperation nor execute<Op>', async () => {
    const reader = await p.key(['records:read', 'records:write']);
    const names = await mutationNames(reader);
    expect(names).toContain('createNote');
    expect(names.filter((n) => n.startsWith('execute'))).toEqual([]);
    const r = await p.gql(reader, 'mutation { executeOperation(key: "ping") { id } }');
    expect(r.errors[0].message).toStartWith('Cannot query field "executeOperation"');
    const typed = await p.gql(reader, 'mutation { executePing { id } }');
    expect(typed.errors[0].message).toStartWith('Cannot query field "executePing"');
  });

  test('a key with one per-operation scope sees executeOperation and that typed field only', async () => {
    const one = await p.key(['operations:execute:ping']);
    const names = (await mutationNames(one)).filter((n) => n.startsWith('execute'));
    expect(names.sort()).toEqual(['executeOperation', 'executePing']);
    const pk = await p.key(['records:read'], 'pk');
    expect((await mutationNames(pk)).filter((n) => n.startsWith('execute'))).toEqual([]);
  });
});

describe("a customer's role reaches operations through a public key", () => {
  const password = 'customer execute pw';
  async function customerWith(
    permissions: string[] | null,
  ): Promise<{ pk: string; id: string; auth: Record<string, string>; token: string }> {
    const { upsertRole, assignRole } = await import('../../src/identity/customer-roles.ts');
    const pk = await p.key(['records:read'], 'pk');
    const email = `ce${Math.random().toString(16).slice(2, 10)}@example.com`;
    const reg = await p.gql(
      pk,
      `mutation($e: String!, $p: String!) { registerCustomer(email: $e, password: $p) { customer { id } } }`,
      { e: email, p: password },
    );
    const id = reg.data.registerCustomer.customer.id;
    if (permissions) {
      const role = `r${Math.random().toString(16).slice(2, 10)}`;
      await upsertRole(server.svc.sql, p.projectId, { key: role, name: role, permissions });
      await assignRole(server.svc.sql, p.projectId, role, id);
    }
    const login = await p.gql(
      pk,
      `mutation($e: String!, $p: String!) { loginCustomer(email: $e, password: $p) { accessToken } }`,
      { e: email, p: password },
    );
    const token = login.data.loginCustomer.accessToken;
    return { pk, id, token, auth: { authorization: `Bearer ${token}` } };
  }
  const as = async (c: { pk: string; auth: Record<string, string> }, query: string) =>
    (
      await fetch(`${server.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': c.pk, ...c.auth },
        body: JSON.stringify({ query }),
      })
    ).json() as Promise<any>;

  test('operations:execute:ping in the role: executePing is in the schema of key plus token and runs; other operations stay absent', async () => {
    const c = await customerWith(['operations:execute:ping']);
    expect((await mutationNames(c.pk, c.auth)).filter((n) => n.startsWith('execute')).sort()).toEqual([
      'executeOperation',
      'executePing',
    ]);
    const ran = await as(c, 'mutation { executePing(input: { hi: 1 }) { id status } }');
    expect(ran.errors).toBeUndefined();
    expect(ran.data.executePing.status).toBe('pending');
    expect((await waitStatus(p, sk, ran.data.executePing.id)).resultJson).toEqual({ pong: { hi: 1 } });
    const other = await as(c, 'mutation { executeOther { id } }');
    expect(other.errors[0].message).toStartWith('Cannot query field "executeOther"');
    const generic = await as(c, 'mutation { executeOperation(key: "other") { id } }');
    expect(generic.errors[0].message).toBe('missing required scope: operations:execute:other');
    // The same key without the token: nothing to execute.
    expect((await mutationNames(c.pk)).filter((n) => n.startsWith('execute'))).toEqual([]);
  });

  test('unscoped operations:execute in the role: every execute<Op>', async () => {
    const c = await customerWith(['operations:execute']);
    expect((await mutationNames(c.pk, c.auth)).filter((n) => n.startsWith('execute')).sort()).toEqual([
      'executeOperation',
      'executeOther',
      'executePing',
      'executeSlow',
    ]);
    const ran = await as(c, 'mutation { executeOther { id status } }');
    expect(ran.data.executeOther.status).toBe('pending');
  });

  test('unscoped operations:execute in the role: cancelOperationExecution for the executions the customer started, no others', async () => {
    const c = await customerWith(['operations:execute']);
    const stranger = await customerWith(['operations:execute']);
    const slowOnly = await customerWith(['operations:execute:slow']);
    expect(await mutationNames(c.pk, c.auth)).toContain('cancelOperationExecution');
    // A per-operation role, and the public key alone, do not cancel (the unscoped scope does).
    expect(await mutationNames(slowOnly.pk, slowOnly.auth)).not.toContain('cancelOperationExecution');
    expect(await mutationNames(c.pk)).not.toContain('cancelOperationExecution');
    const mine = (await as(c, 'mutation { executeSlow { id } }')).data.executeSlow.id as string;
    const theirs = (await as(slowOnly, 'mutation { executeSlow { id } }')).data.executeSlow.id as string;
    await waitStatus(p, sk, mine, 'running');
    const cancel = (who: { pk: string; auth: Record<string, string> }, id: string) =>
      as(who, `mutation { cancelOperationExecution(id: "${id}") { id status } }`);
    // Another customer's execution is not theirs to see, let alone cancel.
    const foreign = await cancel(stranger, mine);
    expect(foreign.errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await cancel(c, theirs)).errors[0].extensions.code).toBe('NOT_FOUND');
    const own = await cancel(c, mine);
    expect(own.errors).toBeUndefined();
    expect(own.data.cancelOperationExecution).toEqual({ id: mine, status: 'cancelled' });
    expect((await waitStatus(p, sk, mine, 'cancelled')).status).toBe('cancelled');
    expect((await cancel(c, mine)).errors[0].extensions.code).toBe('CONFLICT');
    // The other customer's execution runs on.
    const other = await p.gql(sk, `{ operationExecution(id: "${theirs}") { status } }`);
    expect(other.data.operationExecution.status).not.toBe('cancelled');
    expect((await cancel({ pk: sk, auth: {} }, theirs)).data.cancelOperationExecution.status).toBe('cancelled');
  });

  test('self:* never implies operations:execute; a customer without a role executes nothing', async () => {
    for (const c of [await customerWith(['self:*']), await customerWith(null)]) {
      expect((await mutationNames(c.pk, c.auth)).filter((n) => n.startsWith('execute'))).toEqual([]);
      const r = await as(c, 'mutation { executePing { id } }');
      expect(r.errors[0].message).toStartWith('Cannot query field "executePing"');
    }
    // self:* still brings the customer's own writes.
    const self = await customerWith(['self:*']);
    expect(await mutationNames(self.pk, self.auth)).toContain('createNote');
  });

  test('the customer who executed follows jobs:{executionId} and reads operationExecution; another customer may not', async () => {
    const c = await customerWith(['operations:execute:ping']);
    const stranger = await customerWith(['operations:execute:ping']);
    const ran = await as(c, 'mutation { executePing { id } }');
    const id = ran.data.executePing.id;
    await waitStatus(p, sk, id);
    const read = await as(c, `{ operationExecution(id: "${id}") { id status } }`);
    expect(read.errors).toBeUndefined();
    expect(read.data.operationExecution).toEqual({ id, status: 'completed' });
    const theirs = await as(stranger, `{ operationExecution(id: "${id}") { id } }`);
    expect(theirs.errors[0].message).toBe('missing required scope: operations:read');
    for (const q of [`token=${c.token}`, `apiKey=${c.pk}&token=${c.token}`]) {
      const res = await fetch(`${server.gatewayUrl}/sse/jobs:${id}?${q}`, { signal: AbortSignal.timeout(10_000) });
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
    for (const q of [
      `token=${stranger.token}`,
      `apiKey=${stranger.pk}&token=${stranger.token}`,
      `apiKey=${c.pk}`,
      `token=${c.token}&x=jobs-star`,
    ]) {
      const channel = q.endsWith('jobs-star') ? 'jobs:*' : `jobs:${id}`;
      const res = await fetch(`${server.gatewayUrl}/sse/${channel}?${q}`, { signal: AbortSignal.timeout(10_000) });
      expect({ q: q.replace(/=[^&]+/g, ''), status: res.status }).toEqual({ q: q.replace(/=[^&]+/g, ''), status: 403 });
      expect(((await res.json()) as { message: string }).message).toBe('missing required scope: operations:read');
    }
  });

  test('two processes: the customer executes through one API process and follows jobs:{executionId} on a gateway process', async () => {
    const { proc, url: gateway } = await spawnServiceBeside(server, 'gateway', { SVC_READ_POOL: '1' });
    try {
      const c = await customerWith(['operations:execute:slow']);
      const ran = await as(c, 'mutation { executeSlow(input: { n: 1 }) { id } }');
      expect(ran.errors).toBeUndefined();
      const id = ran.data.executeSlow.id;
      await waitStatus(p, sk, id, 'running');
      const stream = sse(gateway, `jobs:${id}`, { token: c.token });
      try {
        await eventually(() => stream.isConnected(), 10_000);
        const secretRes = await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/operations/signing-secret`, {
          headers: { authorization: `Bearer ${p.ownerKey}` },
        });
        const { secret } = (await secretRes.json()) as { secret: string };
        const { sign } = await import('../../src/operations/signing.ts');
        const body = JSON.stringify({ status: 'completed', result: { done: true } });
        const callback = await fetch(`${server.apiUrl}/v1/operations/executions/${id}/callback`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-svc-signature': sign(secret, body) },
          body,
        });
        expect(callback.status).toBe(200);
        await eventually(() => stream.events.some((e) => e.event === 'job.completed'), 15_000);
        expect(stream.events.find((e) => e.event === 'job.completed')).toMatchObject({
          channel: `jobs:${id}`,
          data: { id, status: 'completed', resultJson: { done: true } },
        });
      } finally {
        stream.es.close();
      }
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
    }
  }, 60_000);
});
