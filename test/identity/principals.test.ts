import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id logins and second processes are slow on a loaded box: never a reason to fail.
setDefaultTimeout(60_000);
import type { TestServer } from '../support/server.ts';
import { startGqlProject, type GqlProject } from '../graphql/helpers.ts';
import { upsertRole } from '../../src/identity/customer-roles.ts';

let server: TestServer;
let p: GqlProject;
let pk: string;

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    {
      key: 'note',
      name: 'Note',
      versioned: false,
      fields: [
        { key: 'title', type: 'text' },
        { key: 'body', type: 'text', access: { write: ['self', 'service'] } },
      ],
    },
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ]));
  await upsertRole(server.svc.sql, p.projectId, {
    key: 'member',
    name: 'Member',
    permissions: ['self:*'],
    isDefault: true,
  });
}, 60_000);
afterAll(() => server.stop());

async function customer() {
  const e = `p${Math.random().toString(16).slice(2, 10)}@example.com`;
  const r = await p.gql(
    pk,
    `mutation($e: String!) { registerCustomer(email: $e, password: "principal pw 1") { accessToken customer { id } } }`,
    { e },
  );
  return {
    id: r.body.data.registerCustomer.customer.id as string,
    auth: { authorization: `Bearer ${r.body.data.registerCustomer.accessToken}` },
  };
}

const CREATE = `mutation($d: NoteInput!) { createNote(data: $d) { _id title body } }`;
const UPDATE = `mutation($id: ID!, $d: NoteInput!) { updateNote(_id: $id, data: $d) { _id title body } }`;

describe('key + token = that customer', () => {
  test('a customer with records:write:note (from self:*) creates through the public key and owns the record', async () => {
    const a = await customer();
    const r = await p.gql(pk, CREATE, { d: { title: 'mine', body: 'hello' } }, a.auth);
    expect(r.body.errors).toBeUndefined();
    const id = r.body.data.createNote._id;
    const [row] = await server.svc.sql<
      { owner_customer_id: string; created_by: string }[]
    >`select owner_customer_id, created_by from records where id = ${id}`;
    expect(row).toEqual({ owner_customer_id: a.id, created_by: a.id });
    // The key alone has no write field; other models stay read-only for the customer too.
    const keyOnly = await p.gql(pk, 'mutation { createNote(data: { title: "x" }) { _id } }');
    expect(keyOnly.body.errors[0].message).toStartWith('Cannot query field "createNote"');
    const page = await p.gql(pk, 'mutation { createPage(data: { title: "x" }) { _id } }', undefined, a.auth);
    expect(page.body.errors[0].message).toStartWith('Cannot query field "createPage"');
    // The read back is theirs alone: private, never shared.
    const read = await p.gql(pk, `query($id: ID!) { note(_id: $id) { title body } }`, { id }, a.auth);
    expect(read.body.data.note).toEqual({ title: 'mine', body: 'hello' });
    expect(read.headers.get('cache-control')).toBe('private, no-store');
  });

  test('self write access: the owner updates a self-only field; another customer cannot touch the record', async () => {
    const a = await customer();
    const b = await customer();
    const id = (await p.gql(pk, CREATE, { d: { title: 't', body: 'b' } }, a.auth)).body.data.createNote._id;
    const mine = await p.gql(pk, UPDATE, { id, d: { body: 'changed' } }, a.auth);
    expect(mine.body.errors).toBeUndefined();
    expect(mine.body.data.updateNote.body).toBe('changed');
    const theirs = await p.gql(pk, UPDATE, { id, d: { title: 'hijack' } }, b.auth);
    expect(theirs.body.errors[0]).toMatchObject({
      message: 'Insufficient permissions',
      extensions: { code: 'PERMISSION_DENIED' },
    });
    const [row] = await server.svc.sql<
      { data: { title: string; body: string } }[]
    >`select data from record_content where record_id = ${id} and stage = 'draft'`;
    expect(row!.data).toEqual({ title: 't', body: 'changed' });
  });

  test('a secret key writing a self-only field of a record it does not own as a customer is still the service', async () => {
    const sk = await p.key('sk', ['records:read', 'records:write']);
    const r = await p.gql(sk, CREATE, { d: { title: 's', body: 'service may' } });
    expect(r.body.errors).toBeUndefined();
    const [row] = await server.svc.sql<
      { owner_customer_id: string | null }[]
    >`select owner_customer_id from records where id = ${r.body.data.createNote._id}`;
    expect(row!.owner_customer_id).toBeNull();
  });
});
