import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventually } from '../support/eventually.ts';
import { spawnServiceBeside } from '../support/process.ts';
import { eventsSocket, sse } from './support.ts';

// Two processes and argon2id logins on a loaded box: generous.
setDefaultTimeout(60_000);

/**
 * `changes:*` covers every model (spec "Gateway event channels"): it delivers the records of
 * every model the holder may read — with `records:read`, all of them; with per-model scopes (a
 * customer's role, `self:*`) or a model allow-list, exactly those models — and never the others.
 * Writes go through one process, subscribers sit on a gateway process.
 */
let worker: TestServer;
let gateway: string;
let proc: ReturnType<typeof Bun.spawn>;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  worker = await startTestServer();
  ({ proc, url: gateway } = await spawnServiceBeside(worker, 'gateway', { SVC_READ_POOL: '1' }));
  p = await gqlProject(
    worker,
    [
      { key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] },
      { key: 'note', name: 'Note', fields: [{ key: 'body', type: 'text', access: { write: ['self', 'service'] } }] },
      { key: 'order', name: 'Order', access: { read: ['self', 'service'] }, fields: [{ key: 'item', type: 'text' }] },
    ],
    'rt-wildcard',
  );
  sk = await p.key('sk', ALL_SECRET);
}, 60_000);

afterAll(async () => {
  proc.kill('SIGTERM');
  await proc.exited;
  await worker.stop();
});

async function customerToken(permissions: string[]): Promise<string> {
  const { upsertRole, assignRole } = await import('../../src/identity/customer-roles.ts');
  const pk = await p.key('pk', ['records:read']);
  const email = `w${Math.random().toString(16).slice(2, 10)}@example.com`;
  const reg = await p.gql(
    pk,
    `mutation($e: String!) { registerCustomer(email: $e, password: "wildcard pw 123") { customer { id } } }`,
    { e: email },
  );
  const role = `r${Math.random().toString(16).slice(2, 10)}`;
  await upsertRole(worker.svc.sql, p.projectId, { key: role, name: role, permissions });
  await assignRole(worker.svc.sql, p.projectId, role, reg.body.data.registerCustomer.customer.id);
  const login = await p.gql(
    pk,
    `mutation($e: String!) { loginCustomer(email: $e, password: "wildcard pw 123") { accessToken } }`,
    { e: email },
  );
  return login.body.data.loginCustomer.accessToken;
}

const create = async (T: string, data: string) =>
  (await p.gql(sk, `mutation { create${T}(data: { ${data} }) { _id } }`)).body.data[`create${T}`]._id as string;

describe('changes:* across processes', () => {
  test('every model the holder may read, and only those, on /_events and SSE', async () => {
    const reader = await p.key('sk', ['records:read']);
    const publicReader = await p.key('pk', ['records:read']);
    const notesOnly = await p.key('pk', ['records:read'], ['note']);
    const selfToken = await customerToken(['self:*']);
    const perModel = await customerToken(['records:read:post', 'records:read:note']);
    const subscribers = {
      reader: await eventsSocket(gateway, { apiKey: reader }),
      publicReader: await eventsSocket(gateway, { apiKey: publicReader }),
      both: await eventsSocket(gateway, { apiKey: reader }),
      notesOnly: await eventsSocket(gateway, { apiKey: notesOnly }),
      self: await eventsSocket(gateway, { token: selfToken }),
      perModel: await eventsSocket(gateway, { token: perModel }),
    };
    const streams = {
      self: sse(gateway, 'changes:*', { token: selfToken }),
      notesOnly: sse(gateway, 'changes:*', { apiKey: notesOnly }),
    };
    try {
      for (const s of Object.values(subscribers)) s.send({ type: 'subscribe', channel: 'changes:*' });
      subscribers.both.send({ type: 'subscribe', channel: 'changes:note' });
      await eventually(
        () =>
          Object.values(subscribers).every((s) => s.frames.length >= 1) &&
          subscribers.both.frames.length >= 2 &&
          Object.values(streams).every((s) => s.isConnected()),
        10_000,
      );
      for (const s of Object.values(subscribers)) expect(s.frames.filter((f) => f.type === 'error')).toEqual([]);

      // The gateway process hears the writer process: probe until every socket got a note.
      const notes: string[] = [];
      const end = Date.now() + 15_000;
      const heardNote = (frames: any[]) => frames.some((f) => notes.includes(f.data?.recordId));
      while (
        !Object.values(subscribers).every((s) => heardNote(s.frames)) ||
        !Object.values(streams).every((s) => heardNote(s.events))
      ) {
        if (Date.now() > end)
          throw new Error(
            `a subscriber never heard a note: ${JSON.stringify(Object.fromEntries(Object.entries(subscribers).map(([k, s]) => [k, s.frames])))}`,
          );
        notes.push(await create('Note', 'body: "probe"'));
        await Bun.sleep(200);
      }
      const post = await create('Post', 'title: "p"');
      const order = await create('Order', 'item: "o"');
      const note = await create('Note', 'body: "last"');
      const models = (frames: any[], ids: string[]) =>
        frames.filter((f) => ids.includes(f.data?.recordId)).map((f) => `${f.channel} ${f.data.modelKey}`);
      const ids = [post, order, note];
      await eventually(
        () =>
          models(subscribers.reader.frames, ids).length === 3 &&
          models(subscribers.both.frames, ids).length === 4 &&
          Object.values(subscribers).every((s) => models(s.frames, [note]).length >= 1) &&
          Object.values(streams).every((s) => models(s.events, [note]).length === 1),
        10_000,
      );
      // Give anything that should not arrive the time to arrive.
      await Bun.sleep(500);
      // records:read on a secret key (the service reads every order): every model.
      expect(models(subscribers.reader.frames, ids)).toEqual(['changes:* post', 'changes:* order', 'changes:* note']);
      expect(models(subscribers.both.frames, ids).sort()).toEqual([
        'changes:* note',
        'changes:* order',
        'changes:* post',
        'changes:note note',
      ]);
      // A public key: order is owner-only, its records are not the reader's to hear about.
      expect(models(subscribers.publicReader.frames, ids)).toEqual(['changes:* post', 'changes:* note']);
      // A model allow-list, self:* (note only), per-model scopes of a role.
      expect(models(subscribers.notesOnly.frames, ids)).toEqual(['changes:* note']);
      expect(models(subscribers.self.frames, ids)).toEqual(['changes:* note']);
      expect(models(subscribers.perModel.frames, ids)).toEqual(['changes:* post', 'changes:* note']);
      expect(models(streams.self.events, ids)).toEqual(['changes:* note']);
      expect(models(streams.notesOnly.events, ids)).toEqual(['changes:* note']);
    } finally {
      if (process.env.DEBUG_WILDCARD)
        console.log(
          JSON.stringify(
            {
              ws: Object.fromEntries(Object.entries(subscribers).map(([k, s]) => [k, s.frames])),
              sse: Object.fromEntries(Object.entries(streams).map(([k, s]) => [k, s.events])),
            },
            null,
            1,
          ),
        );
      for (const s of Object.values(subscribers)) s.ws.close();
      for (const s of Object.values(streams)) s.es.close();
    }
  });

  test('a holder who may read no model is refused changes:*', async () => {
    const none = await customerToken(['notifications:read']);
    const res = await fetch(`${gateway}/sse/changes:*?token=${none}`, { signal: AbortSignal.timeout(10_000) });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { message: string }).message).toBe('missing required scope: records:read');
  });
});
