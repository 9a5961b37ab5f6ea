import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { checkFieldWrites, keyPrincipals, writerPrincipals } from '../../src/content/field-access.ts';
import type { ModelDef } from '../../src/projects/types.ts';

/** Field `access` rules (spec "Field definition"; docs/graphql.md "Field access"). */
let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;

const account: ModelDef = {
  key: 'account',
  name: 'Account',
  fields: [
    { key: 'name', type: 'text', queryable: true },
    // Only customers (their own record) and admins may write it; secret keys may not.
    { key: 'nickname', type: 'text', access: { write: ['self', 'admin'] } },
    { key: 'tier', type: 'text', queryable: true, access: { write: ['service', 'admin'] } },
    // Readable by backends only: public keys see null, cannot filter or sort on it.
    { key: 'secretNote', type: 'text', queryable: true, access: { read: ['service'] } },
    // Readable only by the customer it belongs to: even secret keys read null (and no history).
    { key: 'diary', type: 'text', access: { read: ['self'] } },
  ],
  lookups: [{ keyBy: ['secretNote'] }],
};

const mutate = `mutation($d: AccountInput!) { createAccount(data: $d) { _id name nickname tier } }`;
const BATCH = `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`;

async function count(): Promise<number> {
  const r = await p.gql(sk, `{ accounts(preview: true) { totalCount } }`);
  return r.body.data.accounts.totalCount;
}

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [account]);
  sk = await p.key('sk', ALL_SECRET);
  pk = await p.key('pk', ['records:read', 'search:read']);
});
afterAll(() => server.stop());

describe('principals of a request', () => {
  test('secret keys are service, public keys are public', () => {
    expect([...keyPrincipals({ kind: 'sk' })]).toEqual(['service']);
    expect([...keyPrincipals({ kind: 'sk_t' })]).toEqual(['service']);
    expect([...keyPrincipals({ kind: 'pk' })]).toEqual(['public']);
    expect([...keyPrincipals({ kind: 'pk_t' })]).toEqual(['public']);
    const ctx = { principal: { kind: 'sk' } } as never;
    expect([...writerPrincipals(ctx, { recordId: null })]).toEqual(['service']);
    expect(() => checkFieldWrites(ctx, account, { name: 'x', tier: 'gold' }, { recordId: null })).not.toThrow();
    expect(() => checkFieldWrites(ctx, account, { nickname: null }, { recordId: null })).toThrow(
      'Insufficient permissions',
    );
  });
});

describe('access.write', () => {
  test('fields without rules and fields listing service are writable with a secret key', async () => {
    const r = await p.gql(sk, mutate, { d: { name: 'a', tier: 'gold' } });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.createAccount).toMatchObject({ name: 'a', tier: 'gold', nickname: null });
  });

  test('create setting a field whose access.write excludes service: PERMISSION_DENIED naming the field, nothing written', async () => {
    const before = await count();
    const r = await p.gql(sk, mutate, { d: { name: 'b', nickname: 'bee' } });
    expect(r.body.data).toBeNull();
    expect(r.body.errors).toHaveLength(1);
    expect(r.body.errors[0].message).toBe('Insufficient permissions');
    expect(r.body.errors[0].extensions).toEqual({ code: 'PERMISSION_DENIED', field: 'nickname' });
    expect(await count()).toBe(before);
  });

  test('setting it to null is a write too; update is checked like create', async () => {
    const c = await p.gql(sk, mutate, { d: { name: 'c' } });
    const id = c.body.data.createAccount._id;
    const r = await p.gql(
      sk,
      `mutation($id: ID!) { updateAccount(_id: $id, data: { name: "changed", nickname: null }) { _id } }`,
      { id },
    );
    expect(r.body.errors[0].extensions).toEqual({ code: 'PERMISSION_DENIED', field: 'nickname' });
    const after = await p.gql(sk, `query($id: ID!) { account(_id: $id, preview: true) { name } }`, { id });
    expect(after.body.data.account.name).toBe('c');
  });

  test('a batch with one denied field rolls back every operation', async () => {
    const before = await count();
    const r = await p.gql(sk, BATCH, {
      ops: [
        { action: 'CREATE', modelKey: 'account', data: { name: 'ok 1' } },
        { action: 'CREATE', modelKey: 'account', data: { name: 'ok 2', tier: 'silver' } },
        { action: 'CREATE', modelKey: 'account', data: { name: 'denied', nickname: 'x' } },
      ],
    });
    expect(r.body.errors[0].message).toBe('Insufficient permissions');
    expect(r.body.errors[0].extensions).toEqual({ code: 'PERMISSION_DENIED', field: 'nickname' });
    expect(await count()).toBe(before);
  });

  test('public keys have no write fields at all', async () => {
    const r = await p.gql(pk, `mutation { createAccount(data: { name: "x" }) { _id } }`);
    expect(r.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});

describe('access.read', () => {
  let id: string;
  beforeAll(async () => {
    const c = await p.gql(
      sk,
      `mutation { createAccount(naturalKey: "r1", data: { name: "reader", secretNote: "hush" }) { _id } }`,
    );
    id = c.body.data.createAccount._id;
    const pub = await p.gql(sk, `mutation($id: ID!) { publishAccountVersion(_id: $id) { _id } }`, { id });
    expect(pub.body.errors).toBeUndefined();
  });

  test('a principal not listed reads null, in typed fields, content, lists and the generic record', async () => {
    const q = `query($id: ID!) {
      account(_id: $id) { name secretNote content }
      accounts(first: 50) { edges { node { name secretNote content } } }
      record(_id: $id) { content ... on Account { secretNote } } }`;
    const pub = await p.gql(pk, q, { id });
    expect(pub.body.errors).toBeUndefined();
    expect(pub.body.data.account).toEqual({ name: 'reader', secretNote: null, content: { name: 'reader' } });
    const node = pub.body.data.accounts.edges.find((e: any) => e.node.name === 'reader').node;
    expect(node).toEqual({ name: 'reader', secretNote: null, content: { name: 'reader' } });
    expect(pub.body.data.record).toEqual({ content: { name: 'reader' }, secretNote: null });
  });

  test('a listed principal reads the value', async () => {
    const r = await p.gql(sk, `query($id: ID!) { account(_id: $id) { secretNote content } }`, { id });
    expect(r.body.data.account).toEqual({ secretNote: 'hush', content: { name: 'reader', secretNote: 'hush' } });
  });

  test('a field no key may read: null for secret keys too, and left out of the version history', async () => {
    const c = await p.gql(
      sk,
      `mutation { createAccount(data: { name: "d", diary: "dear diary" }) { _id diary content } }`,
    );
    expect(c.body.errors).toBeUndefined();
    expect(c.body.data.createAccount.diary).toBeNull();
    expect(c.body.data.createAccount.content).toEqual({ name: 'd' });
    const v = await p.gql(sk, `query($id: ID!) { recordVersions(_id: $id) { action content } }`, {
      id: c.body.data.createAccount._id,
    });
    expect(v.body.data.recordVersions).toEqual([{ action: 'created', content: { name: 'd' } }]);
    // Stored all the same (the customer-auth issue gives `self` its reads).
    const [row] = await server.svc
      .sql`select data from record_content where record_id = ${c.body.data.createAccount._id}`;
    expect(row!.data.diary).toBe('dear diary');
  });

  test('no filter, sort, lookup or search on a field the key cannot read', async () => {
    const w = await p.gql(pk, `{ accounts(where: { secretNote: { eq: "hush" } }) { totalCount } }`);
    expect(w.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const o = await p.gql(pk, `{ accounts(orderBy: [{ field: secretNote }]) { totalCount } }`);
    expect(o.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const l = await p.gql(pk, `{ account(secretNote: "hush") { _id } }`);
    expect(l.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const s = await p.gql(pk, `{ searchAccounts(query: "hush") { totalCount } }`);
    expect(s.body.data.searchAccounts.totalCount).toBe(0);
    // The secret key may filter on it.
    const ok = await p.gql(sk, `{ accounts(where: { secretNote: { eq: "hush" } }) { totalCount } }`);
    expect(ok.body.data.accounts.totalCount).toBe(1);
  });
});
