import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { EventBus, type BusEvent, type TxQuery } from '../../src/bus/bus.ts';
import { connect, type Sql } from '../../src/store/db.ts';
import { migratedDatabase, serverUrl } from '../support/db.ts';
import { eventually } from '../support/eventually.ts';
import { literal } from '../../src/content/tx.ts';
import { PostgresTransport } from '../../src/bus/postgres.ts';
import { parseLsn } from '../../src/store/lsn.ts';

let url: string;
let sqlA: Sql;
let sqlB: Sql;
const WATCHDOG_MS = Number(process.env.SVC_TEST_BUS_WATCHDOG_MS ?? 200);
// Tests that are not about a lost listener keep the production watchdog: a 200 ms one on a loaded
// CI box declares the listener lost after 600 ms without its own ping and re-listens, and a
// notification sent in that window is (rightly) gone — which is what failed CI once.
const CALM_MS = 5_000;

beforeAll(async () => {
  const db = await migratedDatabase('bus');
  url = db.url;
  await db.sql.end();
  sqlA = connect(url, { max: 2 });
  sqlB = connect(url, { max: 2 });
});
afterAll(async () => {
  await sqlA.end();
  await sqlB.end();
});

const event = (projectId: string): BusEvent => ({ type: 'project.changed', projectId });

/** Two processes' buses: `a` listening on sqlA and `b` on sqlB, with the given listener watchdog. */
async function twoProcesses(watchdogMs = CALM_MS): Promise<[EventBus, EventBus]> {
  const a = new EventBus();
  const b = new EventBus();
  await a.attach(sqlA, undefined, { watchdogMs });
  await b.attach(sqlB, undefined, { watchdogMs });
  return [a, b];
}

/** Detaches each bus in turn (as each test ends). */
async function detach(...buses: EventBus[]): Promise<void> {
  for (const bus of buses) await bus.detach();
}

/** `stage`'s query on transaction `tx`. */
const inTx =
  (tx: postgres.TransactionSql): TxQuery =>
  (text, params) =>
    tx.unsafe(text, params as never[]);

describe('event bus', () => {
  test('an event published in one process reaches the other, and is not echoed back', async () => {
    const [a, b] = await twoProcesses();
    const atA: BusEvent[] = [];
    const atB: BusEvent[] = [];
    a.subscribe((e) => atA.push(e));
    b.subscribe((e) => atB.push(e));
    await a.publish(event('p1'));
    await eventually(() => atB.length === 1, 2000);
    expect(atB).toEqual([event('p1')]);
    await Bun.sleep(100);
    expect(atA).toEqual([event('p1')]); // delivered locally once, not again by the echo
    await detach(a, b);
  });

  test('a batch of events crosses in order, split to fit the NOTIFY payload limit', async () => {
    const [a, b] = await twoProcesses();
    const atB: BusEvent[] = [];
    b.subscribe((e) => atB.push(e));
    const batch = Array.from({ length: 300 }, (_, i) => event(`p${i}`));
    await a.publishAll(batch);
    await eventually(() => atB.length === 300, 3000);
    expect(atB).toEqual(batch);
    await detach(a, b);
  });

  test('a listener lost while the database refused connections is re-created, and caches are told to start over', async () => {
    const [a, b] = await twoProcesses(WATCHDOG_MS);
    const atB: BusEvent[] = [];
    let restarts = 0;
    b.subscribe((e) => atB.push(e));
    b.onReconnect(() => restarts++);
    await a.publish(event('warm'));
    await eventually(() => atB.length === 1, 2000);

    const name = new URL(url).pathname.slice(1);
    const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`alter database "${name}" with allow_connections false`);
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and query ilike 'listen%'`;
      await Bun.sleep(WATCHDOG_MS * 3);
    } finally {
      await admin.unsafe(`alter database "${name}" with allow_connections true`);
      await admin.end();
    }
    await eventually(() => restarts > 0, WATCHDOG_MS * 20);
    await a.publish(event('after'));
    await eventually(() => atB.some((e) => e.type === 'project.changed' && e.projectId === 'after'), WATCHDOG_MS * 20);
    await detach(a, b);
  }, 20_000);

  test('staged events go out only if the transaction commits, to committed listeners of every process', async () => {
    const [a, b] = await twoProcesses();
    const atA: BusEvent[] = [];
    const atB: BusEvent[] = [];
    a.subscribeCommitted((e) => atA.push(e));
    b.subscribeCommitted((e) => atB.push(e));
    await sqlA
      .begin(async (tx) => {
        await a.stage(inTx(tx), [event('rolled-back')]);
        throw new Error('abort');
      })
      .catch(() => {});
    await sqlA.begin((tx) => a.stage(inTx(tx), [event('kept')]));
    await eventually(() => atA.length === 1 && atB.length === 1, 2000);
    await Bun.sleep(100);
    expect(atA).toEqual([event('kept')]);
    expect(atB).toEqual([event('kept')]);
    await detach(a, b);
  });

  test('transactions of two processes are heard in commit order, not in staging order', async () => {
    const [a, b] = await twoProcesses();
    const heard: string[] = [];
    b.subscribeCommitted((e) => heard.push((e as { projectId: string }).projectId));
    // The first transaction stages first but commits last.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const first = sqlA.begin(async (tx) => {
      await a.stage(inTx(tx), [event('staged-first')]);
      await gate;
    });
    await Bun.sleep(50);
    await sqlB.begin((tx) => b.stage(inTx(tx), [event('committed-first')]));
    release();
    await first;
    await eventually(() => heard.length === 2, 2000);
    expect(heard).toEqual(['committed-first', 'staged-first']);
    await detach(a, b);
  });

  test('an event larger than a NOTIFY crosses through bus_payloads, in order with its neighbours', async () => {
    const [a, b] = await twoProcesses();
    const atB: BusEvent[] = [];
    b.subscribeCommitted((e) => atB.push(e));
    const big: BusEvent = { type: 'custom', topic: 't', projectId: 'p', data: { blob: 'x'.repeat(20_000) } };
    await a.publishAll([event('before'), big, event('after')]);
    await sqlA.begin((tx) => a.stage(inTx(tx), [big, event('tx-after')]));
    await eventually(() => atB.length === 5, 3000);
    expect(atB).toEqual([event('before'), big, event('after'), big, event('tx-after')]);
    await detach(a, b);
  });

  /** A record write's way: outbox rows in the transaction (`statements`), the relay after the commit (`deliverLocal`). */
  /** Answers the flushed WAL position read right after the COMMIT, in the same message (as content/tx.ts). */
  async function writeTx(bus: EventBus, sql: Sql, events: BusEvent[], opts: { fail?: boolean } = {}): Promise<number> {
    const text = [
      'begin',
      ...bus.statements(events, literal),
      opts.fail ? 'select 1/0' : 'select 1',
      'commit',
      'select pg_current_wal_flush_lsn()::text as l',
    ].join(';\n');
    const lsn = await sql.unsafe(text).then(
      (r) => parseLsn((r.at(-1) as unknown as { l: string }[])[0]!.l),
      async () => {
        await sql.unsafe('rollback').catch(() => {});
        return 0;
      },
    );
    if (lsn) bus.deliverLocal(events);
    return lsn;
  }

  test('write events go through the outbox: after the commit, in order, to committed listeners of every process; a failed write sends none', async () => {
    const [a, b] = await twoProcesses();
    const atA: BusEvent[] = [];
    const atB: BusEvent[] = [];
    const lsnB: (number | undefined)[] = [];
    a.subscribeCommitted((e) => atA.push(e));
    b.subscribeCommitted((e, _mark, lsn) => {
      atB.push(e);
      lsnB.push(lsn);
    });
    const big: BusEvent = { type: 'custom', topic: 't', projectId: 'p', data: { blob: 'y'.repeat(20_000) } };
    const sent = [event('w1'), big, ...Array.from({ length: 200 }, (_, i) => event(`w-${i}`))];
    // One connection: the transaction's statements and its COMMIT go as one message.
    const one = connect(url, { max: 1 });
    await writeTx(a, one, [event('never')], { fail: true });
    const afterSent = await writeTx(a, one, sent);
    const afterW2 = await writeTx(a, one, [event('w2')]);
    await eventually(() => atA.length === sent.length + 1 && atB.length === sent.length + 1, 5000);
    expect(atB).toEqual([...sent, event('w2')]);
    expect(atA).toEqual([...sent, event('w2')]);
    // Each event names a WAL position at or past its commit (read replicas: sql/053_bus_relay_lsn.sql).
    for (const lsn of lsnB.slice(0, sent.length)) expect(lsn).toBeGreaterThanOrEqual(afterSent);
    expect(lsnB.at(-1)).toBeGreaterThanOrEqual(afterW2);
    const [left] = await one<{ n: number }[]>`select count(*)::int as n from bus_notify_outbox`;
    expect(left!.n).toBe(0);
    await one.end();
    await detach(a, b);
  });

  test('outbox rows a process committed but never relayed (it died) are sent by another process', async () => {
    const b = new EventBus();
    await b.attach(sqlB, undefined, { watchdogMs: CALM_MS });
    const atB: BusEvent[] = [];
    b.subscribeCommitted((e) => atB.push(e));
    const one = connect(url, { max: 1 });
    // A process that wrote its outbox rows and committed, then died before relaying: a
    // transport that never started (no listener, no relay) writes them.
    const dead = new PostgresTransport(sqlA);
    const orphans = [event('orphan-1'), event('orphan-2')];
    await one.unsafe(['begin', ...dead.statements(orphans, literal), 'commit'].join(';\n'));
    // The next write of the other process relays everything committed, oldest first.
    await writeTx(b, one, [event('b-1')]);
    await eventually(() => atB.length === 3, 5000);
    expect(atB).toEqual([event('orphan-1'), event('orphan-2'), event('b-1')]);
    await one.end();
    await b.detach();
  });
});
