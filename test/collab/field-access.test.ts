import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startGqlProject, type GqlProject } from '../graphql/helpers.ts';
import { upsertRole } from '../../src/identity/customer-roles.ts';
import { eventually } from '../support/eventually.ts';
import { editor, roomOf, synced, tryJoin, type Editor } from './support.ts';

setDefaultTimeout(60_000);

/**
 * Field `access.write` rules hold inside a room: an update touching a field the editor may not
 * write is refused — never applied, relayed or saved — and the editor is told with y-protocols'
 * "permission denied" (WebsocketProvider logs it); the editor's other edits go on working.
 */
let server: TestServer;
let p: GqlProject;
let pk: string;
let sk: string;
const open: Editor[] = [];
const warnings: string[] = [];
const warn = console.warn;

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    {
      key: 'ticket',
      name: 'Ticket',
      versioned: false,
      fields: [
        { key: 'title', type: 'text' },
        { key: 'body', type: 'text', access: { write: ['self', 'service'] } },
        { key: 'status', type: 'text', access: { write: ['service'] } },
      ],
    },
    {
      key: 'memo',
      name: 'Memo',
      versioned: false,
      fields: [
        { key: 'text', type: 'text' },
        { key: 'internal', type: 'text', access: { read: ['service'] } },
      ],
    },
  ]));
  sk = await p.key('sk', ['records:read', 'records:write', 'drafts:read']);
  await upsertRole(server.svc.sql, p.projectId, {
    key: 'member',
    name: 'Member',
    permissions: ['self:*'],
    isDefault: true,
  });
  console.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(' '));
});
afterAll(async () => {
  console.warn = warn;
  for (const e of open) e.close();
  await server.stop();
});

async function customer(): Promise<{ id: string; token: string }> {
  const e = `c${Math.random().toString(16).slice(2, 10)}@example.com`;
  const r = await p.gql(
    pk,
    `mutation($e: String!) { registerCustomer(email: $e, password: "collab pw 1") { accessToken customer { id } } }`,
    { e },
  );
  return { id: r.body.data.registerCustomer.customer.id, token: r.body.data.registerCustomer.accessToken };
}

/** Polls an async read until `done` holds (or `ms` pass); returns the last value read. */
async function until<T>(read: () => Promise<T>, done: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  let v = await read();
  while (!done(v) && Date.now() < end) {
    await Bun.sleep(100);
    v = await read();
  }
  return v;
}

async function content(id: string): Promise<Record<string, unknown>> {
  const r = await p.gql(sk, `query($id: ID!) { record(_id: $id) { content } }`, { id });
  return r.body.data.record.content;
}

const ed = (room: string, params: Record<string, string>) => {
  const e = editor(server.gatewayUrl, room, params);
  open.push(e);
  return e;
};

describe('field access.write inside a room', () => {
  test('a customer edits the fields it may write; its edit of a service-only field is refused, told, never seen or saved', async () => {
    const c = await customer();
    const created = await p.gql(
      pk,
      `mutation { createTicket(data: { title: "Printer", body: "jams" }) { _id } }`,
      undefined,
      { authorization: `Bearer ${c.token}` },
    );
    expect(created.body.errors).toBeUndefined();
    const id = created.body.data.createTicket._id as string;
    await p.gql(sk, `mutation($id: ID!) { updateTicket(_id: $id, data: { status: "open" }) { _id } }`, { id });

    const staff = ed(roomOf('ticket', id), { apiKey: sk });
    const owner = ed(roomOf('ticket', id), { token: c.token });
    await synced(staff, owner);
    expect(owner.text('status').toString()).toBe('open');

    // `body` grants self: the owner's edit reaches the staff editor.
    owner.text('body').insert(4, ' daily');
    await eventually(() => staff.text('body').toString() === 'jams daily', 10_000);

    // `status` is service-only: refused, and the owner is told which field.
    const before = warnings.length;
    owner.text('status').delete(0, 4);
    owner.text('status').insert(0, 'closed');
    await eventually(
      () => warnings.slice(before).some((w) => w.includes('Permission denied') && w.includes('status')),
      10_000,
    );

    // The owner's next edits still apply (its refused updates leave no gap in its clock).
    owner.text('title').insert(7, ' on floor 2');
    await eventually(() => staff.text('title').toString() === 'Printer on floor 2', 10_000);
    expect(staff.text('status').toString()).toBe('open');

    // The staff editor (service) may change status; the owner sees it.
    staff.text('status').insert(4, ' (triaged)');
    await eventually(() => owner.text('status').toString().includes('(triaged)'), 10_000);

    owner.close();
    staff.close();
    expect(
      await until(
        () => content(id),
        (c) => c.title === 'Printer on floor 2',
      ),
    ).toMatchObject({ title: 'Printer on floor 2', body: 'jams daily', status: 'open (triaged)' });

    // A newcomer gets the room's state: the refused edit is nowhere.
    const later = ed(roomOf('ticket', id), { apiKey: sk });
    await synced(later);
    expect(later.text('status').toString()).toBe('open (triaged)');
    later.close();
  });

  test('a read-only socket is told its updates are refused; it still sees live edits', async () => {
    const r = await p.gql(sk, `mutation { createTicket(data: { title: "Watch" }) { _id } }`);
    const id = r.body.data.createTicket._id as string;
    const reader = await p.key('pk', ['records:read']);
    const w = ed(roomOf('ticket', id), { apiKey: sk });
    const ro = ed(roomOf('ticket', id), { apiKey: reader, readOnly: '1' });
    await synced(w, ro);
    const before = warnings.length;
    ro.text('title').insert(0, 'X');
    await eventually(() => warnings.slice(before).some((m) => m.includes('read-only')), 10_000);
    w.text('title').insert(5, 'ed');
    await eventually(() => ro.text('title').toString().endsWith('Watched'), 10_000);
    expect(w.text('title').toString()).toBe('Watched');
    w.close();
    ro.close();
  });

  test('a field the joiner may not read keeps it out of the room: 403', async () => {
    const memo = await p.gql(sk, `mutation { createMemo(data: { text: "hi", internal: "pay rise" }) { _id } }`);
    const id = memo.body.data.createMemo._id as string;
    const c = await customer();
    // Theirs, so they could write it; but `internal` is service-only to read.
    await server.svc.sql`update records set owner_customer_id = ${c.id} where id = ${id}`;
    const refused = await tryJoin(server.gatewayUrl, roomOf('memo', id), { token: c.token });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain('internal');
    const info = await fetch(`${server.apiUrl}/collab/info?recordId=${id}&modelKey=memo`, {
      headers: { 'x-api-key': pk },
    });
    expect(((await info.json()) as { enabled: boolean }).enabled).toBe(false);
    // The service key reads every field: it joins.
    const staff = ed(roomOf('memo', id), { apiKey: sk });
    await synced(staff);
    expect(staff.text('internal').toString()).toBe('pay rise');
    staff.close();
  });
});
