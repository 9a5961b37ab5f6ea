import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
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
  ep = endpoint({ '/ping': (_r, body) => Response.json({ pong: body.input ?? null }), '/other': () => Response.json({ ok: true }) });
  p = await opsProject(server, 'cust-exec');
  await p.push({
    operationBaseUrl: ep.url,
    operations: [{ key: 'ping', endpoint: '/ping' }, { key: 'other', endpoint: '/other' }],
    models: [{ key: 'note', name: 'Note', fields: [{ key: 'body', type: 'text', access: { write: ['self', 'service'] } }] }],
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
