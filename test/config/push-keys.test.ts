import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { folder, minimal } from './support.ts';
import { EventBus } from '../../src/bus/bus.ts';
import { connect, type Sql } from '../../src/store/db.ts';
import { eventually } from '../support/eventually.ts';

let server: TestServer;
let probe: Sql;
beforeAll(async () => {
  server = await startTestServer();
  probe = connect(server.databaseUrl, { max: 3 });
});
afterAll(async () => {
  await probe.end();
  await server.stop();
});

const push = (key: string, dir: string) => cli(server, key, 'push', '--dir', dir, '--json');
const website = { name: 'website', keyType: 'public', envVar: 'SVC_PUBLIC_KEY', scopes: ['records:read'] };

describe('API keys in a push', () => {
  test('key.changed reaches other processes only after the push commits', async () => {
    const p = await bootstrapProject(server, 'kc');
    // Another process: its own bus on the same database. On every key.changed it looks the key
    // up at once, as its key cache would, and notes whether the new row was there to be seen.
    const otherSql = connect(server.databaseUrl, { max: 2 });
    const other = new EventBus();
    await other.attach(otherSql);
    const lookups: boolean[] = [];
    other.subscribe((e) => {
      if (e.type !== 'key.changed' || !e.keyHash) return;
      void probe`select 1 from api_keys where key_hash = ${e.keyHash} and deleted_at is null`.then((rows) =>
        lookups.push(rows.length > 0),
      );
    });
    // Hold the push between creating the key and committing: a trigger on its config_api_keys
    // insert waits for an advisory lock this test holds.
    await probe.unsafe(`create function svc_test_pause() returns trigger language plpgsql as
      $$ begin perform pg_advisory_xact_lock(4242); return new; end $$`);
    await probe.unsafe(
      'create trigger svc_test_pause before insert on config_api_keys for each row execute function svc_test_pause()',
    );
    const locker = connect(server.databaseUrl, { max: 1 });
    const r = await locker.reserve().then(async (conn) => {
      await conn`select pg_advisory_lock(4242)`;
      const pushing = push(p.ownerKey, folder({ 'svc.config.json': minimal(p, { apiKeys: [website] }) }));
      const end = Date.now() + 20_000;
      while (
        (await probe`select 1 from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory'`)
          .length === 0
      ) {
        if (Date.now() > end) throw new Error('the push never reached its key insert');
        await Bun.sleep(20);
      }
      // The push has created the key and is mid-transaction: nothing may have been announced.
      await Bun.sleep(300);
      expect(lookups).toEqual([]);
      await conn`select pg_advisory_unlock(4242)`;
      conn.release();
      return pushing;
    });
    await locker.end();
    await probe.unsafe('drop trigger svc_test_pause on config_api_keys; drop function svc_test_pause()');
    expect(r.code).toBe(0);
    await eventually(() => lookups.length > 0, 5000);
    expect(lookups.every(Boolean)).toBe(true);
    await other.detach();
    await otherSql.end();
  }, 40_000);

  test('a driver error while creating a key is a masked server fault, not BAD_USER_INPUT with SQL text', async () => {
    const p = await bootstrapProject(server, 'fault');
    // A real fault in the real database: a constraint the code knows nothing about.
    await probe.unsafe(`alter table api_keys add constraint svc_test_fault check (name <> 'faulty')`);
    const log = spyOn(console, 'error').mockImplementation(() => {});
    try {
      const r = await push(
        p.ownerKey,
        folder({ 'svc.config.json': minimal(p, { apiKeys: [{ ...website, name: 'faulty' }] }) }),
      );
      expect(r.code).toBe(1);
      expect(r.err).toContain('500 INTERNAL_SERVER_ERROR: Internal server error');
      expect(r.err).not.toContain('svc_test_fault');
      expect(log.mock.calls.map((c) => c.join(' ')).join('\n')).toContain('svc_test_fault');
    } finally {
      log.mockRestore();
      await probe.unsafe('alter table api_keys drop constraint svc_test_fault');
    }
  });

  test('a NUL character anywhere in a config is reported at its path, never reaches PostgreSQL', async () => {
    const p = await bootstrapProject(server, 'nul');
    const r = await push(
      p.ownerKey,
      folder({
        'svc.config.json': minimal(p, {
          models: [{ key: 'page', name: 'Pa\u0000ge', fields: [{ key: 'title', type: 'text' }] }],
          apiKeys: [{ ...website, name: 'web\u0000site' }],
          extraThing: { ['a\u0000b']: 1 },
        }),
      }),
    );
    expect(r.code).toBe(1);
    expect(r.err).not.toContain('INTERNAL_SERVER_ERROR');
    const paths = r.json.errors.map((e: { path: string }) => e.path);
    expect(paths).toEqual(expect.arrayContaining(['models[0].name', 'apiKeys[0].name', 'extraThing']));
  });
});
