import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { EventBus, type BusEvent } from '../../src/bus/bus.ts';
import { NatsTransport, subjectOf } from '../../src/bus/nats/transport.ts';
import { NarrowListener } from '../../src/bus/nats/narrow.ts';
import { connect as natsConnect, RetentionPolicy, StorageType } from 'nats';
import { connect, type Sql } from '../../src/store/db.ts';
import { migratedDatabase } from '../support/db.ts';
import { eventually } from '../support/eventually.ts';
import { startNats, type TestNats } from '../support/nats.ts';
import { parseLsn } from '../../src/store/lsn.ts';
import { literal } from '../../src/content/tx.ts';

/**
 * The NATS JetStream transport, with two buses standing for two processes (each its own pool and
 * its own NATS connection) on one database and one NATS server of the test's own.
 */
let nats: TestNats;
let url: string;
let sqlA: Sql;
let sqlB: Sql;
let n = 0;

beforeAll(async () => {
  nats = await startNats();
  const db = await migratedDatabase('busnats');
  url = db.url;
  await db.sql.end();
  sqlA = connect(url, { max: 3 });
  sqlB = connect(url, { max: 3 });
});
afterAll(async () => {
  // The server first: a beforeAll that failed after starting it (no database) left the pools unset.
  await nats?.stop();
  await sqlA?.end();
  await sqlB?.end();
});

const event = (projectId: string, modelKey = 'post'): BusEvent => ({
  type: 'record.changed',
  projectId,
  action: 'created',
  recordId: `r${n++}`,
  modelKey,
  userId: null,
});
/** A deployment name of its own per test: its subjects and stream do not overlap another's. */
const stream = () => `t${Math.random().toString(36).slice(2, 8)}`;

async function pair(name = stream()) {
  const a = new EventBus();
  const b = new EventBus();
  await a.attachTransport(new NatsTransport(`${nats.url}/${name}`, sqlA));
  await b.attachTransport(new NatsTransport(`${nats.url}/${name}`, sqlB));
  return { a, b };
}

const commitStaged = (sql: Sql, bus: EventBus, events: BusEvent[]) =>
  sql
    .begin(async (tx) => {
      await bus.stage((t, p) => tx.unsafe(t, p as never[]) as unknown as Promise<unknown[]>, events);
    })
    .then(() => bus.deliverLocal(events));

describe('event bus on NATS JetStream', () => {
  test('subjects name the project and the model, so a consumer can take only what it serves', () => {
    expect(subjectOf(event('p1', 'post'))).toBe('svc.p1.changes.post');
    expect(subjectOf({ type: 'project.changed', projectId: 'p.1' })).toBe('svc.p_1.events.project.changed');
    expect(subjectOf({ type: 'signing-keys.changed' })).toBe('svc._.signing-keys.changed');
  });

  test('staged events cross only if the transaction commits, once, in order, to committed listeners of both processes', async () => {
    const name = stream();
    const { a, b } = await pair(name);
    const atA: BusEvent[] = [];
    const atB: BusEvent[] = [];
    const plainA: BusEvent[] = [];
    const lsnB: (number | undefined)[] = [];
    a.subscribeCommitted((e) => atA.push(e));
    b.subscribeCommitted((e, _mark, lsn) => {
      atB.push(e);
      lsnB.push(lsn);
    });
    a.subscribe((e) => plainA.push(e));
    await sqlA
      .begin(async (tx) => {
        await a.stage((t, p) => tx.unsafe(t, p as never[]) as unknown as Promise<unknown[]>, [event('rolled-back')]);
        throw new Error('abort');
      })
      .catch(() => {});
    const kept = Array.from({ length: 20 }, (_, i) => event(`p${i % 3}`));
    // The flushed WAL position right after each commit: the events' `lsn` is at or past it
    // (read replicas; the relay reads it after it saw the commit).
    const flushed: number[] = [];
    const one = connect(url, { max: 1 });
    for (let i = 0; i < kept.length; i += 5) {
      const events = kept.slice(i, i + 5);
      // One message, as content/tx.ts sends a write: nothing runs between the COMMIT and the read.
      const r = await one.unsafe(
        ['begin', ...a.statements(events, literal), 'commit', 'select pg_current_wal_flush_lsn()::text as l'].join(
          ';\n',
        ),
      );
      flushed.push(parseLsn((r.at(-1) as unknown as { l: string }[])[0]!.l));
      await a.deliverLocal(events);
    }
    await one.end();
    await eventually(() => atA.length === 20 && atB.length === 20, 10_000);
    await Bun.sleep(300);
    expect(atA).toEqual(kept);
    expect(atB).toEqual(kept);
    for (const [i, lsn] of lsnB.entries()) expect(lsn).toBeGreaterThanOrEqual(flushed[Math.floor(i / 5)]!);
    expect(plainA).toEqual(kept); // local at once, never again from the echo
    expect((await sqlA`select count(*)::int as n from bus_outbox`)[0]!.n).toBe(0);
    expect((await a.health()).kind).toBe('nats');
    await a.detach();
    await b.detach();
  }, 30_000);

  test('events committed by a process that died before publishing are sent by another process', async () => {
    const name = stream();
    const heard: BusEvent[] = [];
    // The "dead" writer: its outbox rows are committed, and it never relays them.
    const dead = new NatsTransport(`nats://127.0.0.1:1/${name}`, sqlA);
    const orphan = [event('orphan'), event('orphan')];
    await sqlA.begin(async (tx) => {
      for (const st of dead.statements(orphan, (v) => `'${String(v).replace(/'/g, "''")}'`)) await tx.unsafe(st);
    });
    const b = new EventBus();
    b.subscribeCommitted((e) => heard.push(e));
    // Its consumer starts at "new": the orphan rows are still in the outbox, so they are new.
    await b.attachTransport(new NatsTransport(`${nats.url}/${name}`, sqlB));
    await eventually(() => heard.length === 2, 10_000);
    expect(heard).toEqual(orphan);
    await b.detach();
  }, 30_000);

  test('NATS killed during writes and brought back: writes commit, nothing is lost or repeated for a process that stayed up', async () => {
    const { a, b } = await pair();
    const heard: string[] = [];
    b.subscribeCommitted((e) => heard.push((e as { recordId: string }).recordId));
    const sent: string[] = [];
    const write = async () => {
      const e = event('outage');
      await commitStaged(sqlA, a, [e]);
      sent.push((e as { recordId: string }).recordId);
    };
    for (let i = 0; i < 20; i++) await write();
    await eventually(() => heard.length === 20, 10_000);
    await nats.kill();
    for (let i = 0; i < 30; i++) await write(); // PostgreSQL alone: still committing
    const waiting = await a.health();
    expect(waiting.connected).toBe(false);
    expect(waiting.backlog).toBeGreaterThan(0);
    await nats.restart();
    for (let i = 0; i < 20; i++) await write();
    await eventually(() => heard.length >= 70, 30_000);
    await Bun.sleep(500);
    expect(heard).toEqual(sent);
    expect((await a.health()).backlog).toBe(0);
    await a.detach();
    await b.detach();
  }, 60_000);

  test('a narrowing bus (a gateway) hears only the projects it watches and deployment-wide events, across a NATS restart', async () => {
    const name = stream();
    const writer = new EventBus();
    const gateway = new EventBus();
    await writer.attachTransport(new NatsTransport(`${nats.url}/${name}`, sqlA));
    await gateway.attachTransport(new NatsTransport(`${nats.url}/${name}`, sqlB, { narrow: true }));
    const heard: string[] = [];
    gateway.subscribeCommitted((e) =>
      heard.push(e.type === 'record.changed' ? `${e.projectId}:${e.recordId}` : e.type),
    );
    const release = await gateway.watch('p-watched');
    const expected: string[] = [];
    const write = async (projectId: string) => {
      const e = event(projectId);
      await commitStaged(sqlA, writer, [e]);
      if (projectId === 'p-watched') expected.push(`${projectId}:${(e as { recordId: string }).recordId}`);
    };
    for (let i = 0; i < 10; i++) await write(i % 2 ? 'p-watched' : 'p-other');
    await commitStaged(sqlA, writer, [{ type: 'key.changed', keyId: 'k1', keyHash: null }]);
    expected.push('key.changed');
    await eventually(() => heard.length === expected.length, 10_000);
    await nats.kill();
    for (let i = 0; i < 10; i++) await write(i % 2 ? 'p-watched' : 'p-other');
    await nats.restart();
    for (let i = 0; i < 10; i++) await write(i % 2 ? 'p-watched' : 'p-other');
    await eventually(() => heard.length >= expected.length, 30_000);
    await Bun.sleep(500);
    expect(heard).toEqual(expected);
    // Once released, the project's events no longer come.
    release();
    await Bun.sleep(100);
    await write('p-watched');
    expected.pop();
    await commitStaged(sqlA, writer, [{ type: 'signing-keys.changed' }]);
    await eventually(() => heard.at(-1) === 'signing-keys.changed', 10_000);
    expect(heard).toEqual([...expected, 'signing-keys.changed']);
    await writer.detach();
    await gateway.detach();
  }, 60_000);

  test('a gap is read back from the stream: missed events once, in order, live ones held until then and not repeated', async () => {
    const nc = await natsConnect({ servers: nats.url });
    const jsm = await nc.jetstreamManager();
    const name = stream();
    await jsm.streams.add({
      name: `${name.toUpperCase()}_BUS`,
      subjects: [`${name}.>`],
      storage: StorageType.Memory,
      retention: RetentionPolicy.Limits,
    });
    const js = nc.jetstream();
    const enc = new TextEncoder();
    let id = 0;
    const publish = (projectId: string) => {
      const e = event(projectId);
      const n = ++id;
      return js
        .publish(
          `${name}.${subjectOf(e, '').slice(1)}`,
          enc.encode(JSON.stringify({ o: 'writer', at: Date.now(), e })),
          { msgID: `db.${n}` },
        )
        .then(() => (e as { recordId: string }).recordId);
    };
    const heard: string[] = [];
    const since = Date.now();
    // Published while the listener was not there.
    const missed = [await publish('p1'), await publish('p2'), await publish('p1')];
    const listener = new NarrowListener(nc, js, `${name.toUpperCase()}_BUS`, name, (w) =>
      heard.push((w.e as { recordId: string }).recordId),
    );
    await listener.start();
    await listener.watch('p1');
    listener.gap(since);
    const live = [await publish('p1'), await publish('p2'), await publish('p1')];
    await eventually(() => heard.length === 4, 10_000);
    await Bun.sleep(300);
    expect(heard).toEqual([missed[0]!, missed[2]!, live[0]!, live[2]!]);
    listener.stop();
    await nc.close();
  }, 30_000);
});
