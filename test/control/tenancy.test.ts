import { afterAll, beforeAll, expect, test } from 'bun:test';
import { migratedDatabase } from '../support/db.ts';
import type { Sql } from '../../src/store/db.ts';
import { addMember, createTenant, memberEmails } from '../../src/control/tenancy.ts';

/**
 * The member emails a record history shows a signed-in member (graphql/resolvers.ts `versions`):
 * only members of the caller's tenant, only member ids (a key id or null names nobody), each
 * id once however often it wrote.
 */
let sql: Sql;
beforeAll(async () => {
  ({ sql } = await migratedDatabase('tenancy'));
});
afterAll(() => sql.end());

test("memberEmails: the tenant's members among a history's writers, nobody else", async () => {
  const a = await createTenant(sql, { kind: 'root' }, { name: 'A', ownerEmail: 'owner@a.test' });
  const b = await createTenant(sql, { kind: 'root' }, { name: 'B', ownerEmail: 'owner@b.test' });
  const owner = {
    kind: 'member' as const,
    memberId: a.memberId,
    tenantId: a.tenantId,
    role: 'owner' as const,
    projectId: null,
    email: 'owner@a.test',
  };
  const ed = await addMember(sql, owner, { email: 'Ed@A.test', role: 'editor' });
  const emails = await memberEmails(sql, a.tenantId, [
    a.memberId,
    ed.memberId,
    ed.memberId,
    b.memberId,
    'key_123',
    null,
    'mem_unknown',
  ]);
  expect(Object.fromEntries(emails)).toEqual({ [a.memberId]: 'owner@a.test', [ed.memberId]: 'ed@a.test' });
  expect((await memberEmails(sql, b.tenantId, [a.memberId, b.memberId])).get(b.memberId)).toBe('owner@b.test');
  expect((await memberEmails(sql, b.tenantId, [a.memberId])).size).toBe(0);
  expect((await memberEmails(sql, a.tenantId, [null, 'key_1'])).size).toBe(0);
});
