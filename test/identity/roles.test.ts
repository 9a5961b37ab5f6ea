import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id logins and second processes are slow on a loaded box: never a reason to fail.
setDefaultTimeout(60_000);
import { createRemoteJWKSet, jwtVerify } from 'jose';
import type { TestServer } from '../support/server.ts';
import { gqlProject, startGqlProject, type GqlProject } from '../graphql/helpers.ts';
import { cli } from '../support/server.ts';

let server: TestServer;
let p: GqlProject;
let pk: string;

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    { key: 'note', name: 'Note', fields: [{ key: 'body', type: 'text', access: { write: ['self', 'service'] } }] },
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ]));
}, 60_000);
afterAll(() => server.stop());

const PAYLOAD = 'accessToken refreshToken customer { id roles }';

async function scopesOf(token: string): Promise<string[]> {
  const jwks = createRemoteJWKSet(new URL(`${server.apiUrl}/.well-known/jwks.json`));
  const { payload } = await jwtVerify(token, jwks, { issuer: 'svc-customer', audience: p.projectId });
  return String(payload.scope).split(' ').filter(Boolean);
}

describe('role stamping (rules 1–4)', () => {
  test('default roles for everyone, self:* expanded to customer-writable models only, assignments at the next login, refresh re-stamps the old scopes', async () => {
    const { upsertRole } = await import('../../src/identity/customer-roles.ts');
    const roleCli = async (verb: 'assign' | 'revoke', customerId: string) => {
      const r = await cli(
        server,
        p.ownerKey,
        'customer-roles',
        verb,
        '--project',
        p.projectId,
        '--key',
        'runner',
        '--customer',
        customerId,
        '--json',
      );
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
    };
    await upsertRole(server.svc.sql, p.projectId, {
      key: 'member',
      name: 'Member',
      permissions: ['self:*', 'notifications:read'],
      isDefault: true,
    });
    await upsertRole(server.svc.sql, p.projectId, {
      key: 'runner',
      name: 'Runner',
      permissions: ['operations:execute'],
    });
    await upsertRole(server.svc.sql, p.projectId, {
      key: 'off',
      name: 'Off',
      permissions: ['records:write'],
      isDefault: true,
    });
    await server.svc
      .sql`update customer_roles set disabled_at = now() where project_id = ${p.projectId} and key = 'off'`;

    const email = `r${Date.now()}@example.com`;
    const reg = (
      await p.gql(
        pk,
        `mutation($e: String!) { registerCustomer(email: $e, password: "role stamping pw") { ${PAYLOAD} } }`,
        { e: email },
      )
    ).body.data.registerCustomer;
    expect(reg.customer.roles).toEqual(['member']);
    // self:* covers `note` (a field grants write to self) and not `page`; never operations:execute.
    expect(await scopesOf(reg.accessToken)).toEqual(['notifications:read', 'records:read:note', 'records:write:note']);

    // `svc customer-roles assign`: the live session keeps its scopes, even through a refresh.
    await roleCli('assign', reg.customer.id);
    const refreshed = (
      await p.gql(pk, `mutation($t: String!) { refreshCustomerToken(refreshToken: $t) { ${PAYLOAD} } }`, {
        t: reg.refreshToken,
      })
    ).body.data.refreshCustomerToken;
    expect(await scopesOf(refreshed.accessToken)).toEqual([
      'notifications:read',
      'records:read:note',
      'records:write:note',
    ]);

    const login = async () =>
      (
        await p.gql(
          pk,
          `mutation($e: String!) { loginCustomer(email: $e, password: "role stamping pw") { ${PAYLOAD} } }`,
          { e: email },
        )
      ).body.data.loginCustomer;
    const l1 = await login();
    expect(l1.customer.roles).toEqual(['member', 'runner']);
    expect(await scopesOf(l1.accessToken)).toContain('operations:execute');

    await roleCli('revoke', reg.customer.id);
    expect(await scopesOf((await login()).accessToken)).not.toContain('operations:execute');
  });

  test('a public key never adds write or execute scopes: a customer without a role holds a read-only token', async () => {
    // A project without roles; `note` is customer-writable, yet nothing grants writing it.
    const q = await gqlProject(
      server,
      [{ key: 'note', name: 'Note', fields: [{ key: 'body', type: 'text', access: { write: ['self', 'service'] } }] }],
      'no-roles',
    );
    const qpk = await q.key('pk', ['records:read', 'notifications:read']);
    const reg = (
      await q.gql(
        qpk,
        `mutation { registerCustomer(email: "plain@example.com", password: "role stamping pw") { accessToken customer { roles } } }`,
      )
    ).body.data.registerCustomer;
    expect(reg.customer.roles).toEqual([]);
    const jwks = createRemoteJWKSet(new URL(`${server.apiUrl}/.well-known/jwks.json`));
    const { payload } = await jwtVerify(reg.accessToken, jwks, { issuer: 'svc-customer', audience: q.projectId });
    // Nothing of the key's is stamped into the token: no write, no execute.
    expect(payload.scope ?? '').toBe('');
    const auth = { authorization: `Bearer ${reg.accessToken}` };
    const write = await q.gql(qpk, 'mutation { createNote(data: { body: "x" }) { _id } }', undefined, auth);
    expect(write.body.errors[0].message).toStartWith('Cannot query field "createNote"');
    // Reading stays what the key allows.
    const read = await q.gql(qpk, '{ notes(first: 1) { totalCount } }', undefined, auth);
    expect(read.body.errors).toBeUndefined();
    expect(read.body.data.notes.totalCount).toBe(0);
  });
});
