import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { cli, startTestServer, type TestServer } from '../support/server.ts';
import { Scheduler, triggerSchedule } from '../../src/operations/scheduler.ts';
import { endpoint, opsProject, waitStatus, type Endpoint, type OpsProject } from './support.ts';

let server: TestServer;
let ep: Endpoint;
let p: OpsProject;

beforeAll(async () => {
  // The server's own scheduler would tick on the real clock; these tests drive schedulers with
  // injected clocks, so the server's first tick is pushed past the end of the file.
  server = await startTestServer({ SVC_OPERATIONS_POLL_MS: '50', SVC_SCHEDULER_TICK_MS: '60000' });
  ep = endpoint({ '/report': (_r, body) => Response.json({ fired: body.input.fireAt }) });
  p = await opsProject(server, 'sched');
  await p.push(config());
}, 30_000);

function config(): Record<string, unknown> {
  return {
    operationBaseUrl: ep.url,
    operations: [{ key: 'report', endpoint: '/report' }],
    schedules: [
      { key: 'nightly', operationKey: 'report', cron: '30 2 * * *', timezone: 'Europe/Berlin' },
      { key: 'often', operationKey: 'report', cron: '*/5 * * * *', timezone: 'UTC' },
      { key: 'off', operationKey: 'report', cron: '* * * * *', enabled: false },
    ],
  };
}

afterAll(async () => {
  ep.stop();
  await server.stop();
});

/** As if the schedules had been pushed at `at`. */
async function pushedAt(at: string): Promise<void> {
  await server.svc.sql`delete from schedule_runs where project_id = ${p.projectId}`;
  await server.svc.sql`update schedules set updated_at = ${new Date(at)} where project_id = ${p.projectId}`;
}

async function runs(key: string): Promise<string[]> {
  const rows = await server.svc.sql<{ fire_at: Date }[]>`
    select fire_at from schedule_runs where project_id = ${p.projectId} and schedule_key = ${key} and not manual order by fire_at`;
  return rows.map((r) => r.fire_at.toISOString());
}

/** Two schedulers (two processes) tick together every `stepMin` minutes of injected time. */
async function drive(from: string, to: string, stepMin: number): Promise<void> {
  const a = new Scheduler(server.svc.sql, server.svc.bus);
  const b = new Scheduler(server.svc.sql, server.svc.bus);
  for (let t = Date.parse(from); t <= Date.parse(to); t += stepMin * 60_000) {
    await Promise.all([a.tick(new Date(t)), b.tick(new Date(t))]);
  }
}

describe('schedules', () => {
  test('Europe/Berlin across spring-forward: 02:30 runs once a day, right after the gap on the DST day', async () => {
    await pushedAt('2026-03-27T12:00:00Z');
    await drive('2026-03-28T00:00:00Z', '2026-03-30T03:00:00Z', 30);
    expect(await runs('nightly')).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
  }, 30_000);

  test('Europe/Berlin across fall-back: the repeated 02:30 runs once', async () => {
    await pushedAt('2026-10-23T12:00:00Z');
    await drive('2026-10-24T00:00:00Z', '2026-10-26T03:00:00Z', 30);
    expect(await runs('nightly')).toEqual([
      '2026-10-24T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T00:30:00.000Z', // the first 02:30 (CEST); the second (CET, 01:30Z) does not run
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
  }, 30_000);

  test('missed occurrences after downtime fire once, not once per missed slot; disabled schedules never fire', async () => {
    await pushedAt('2026-11-01T00:00:00Z');
    await drive('2026-11-01T00:05:00Z', '2026-11-01T00:05:00Z', 1);
    // Down for an hour: twelve */5 slots passed; the next tick fires the latest one only.
    await drive('2026-11-01T01:07:00Z', '2026-11-01T01:07:00Z', 1);
    expect(await runs('often')).toEqual(['2026-11-01T00:05:00.000Z', '2026-11-01T01:05:00.000Z']);
    expect(await runs('off')).toEqual([]);
    const execs = await server.svc.sql<{ status: string; input: any }[]>`
      select e.status, e.input from schedule_runs r join operation_executions e on e.id = r.execution_id
      where r.project_id = ${p.projectId} and r.schedule_key = 'often' order by r.fire_at`;
    expect(execs.map((e) => e.input)).toEqual([
      { scheduleKey: 'often', fireAt: '2026-11-01T00:05:00.000Z', manual: false },
      { scheduleKey: 'often', fireAt: '2026-11-01T01:05:00.000Z', manual: false },
    ]);
  });

  test("a manual trigger in the very millisecond of an occurrence does not take that occurrence's row", async () => {
    await pushedAt('2026-11-02T00:00:00Z');
    // Triggered at 00:05:00.000 exactly, an occurrence of */5: the scheduled run still fires.
    const manual = await triggerSchedule(
      server.svc.sql,
      server.svc.bus,
      p.projectId,
      'often',
      new Date('2026-11-02T00:05:00Z'),
    );
    expect(manual.manual).toBe(true);
    await drive('2026-11-02T00:05:00Z', '2026-11-02T00:06:00Z', 1);
    expect(await runs('often')).toEqual(['2026-11-02T00:05:00.000Z']);
    expect(manual.fireAt).not.toBe('2026-11-02T00:05:00.000Z');
  });

  test('a push repeating an unchanged schedule before its first occurrence was ticked does not skip that occurrence', async () => {
    // Pushed long before the real clock's now; repeated (unchanged) after its first occurrence at
    // 00:05, before any scheduler ticked: 00:05 still fires.
    await pushedAt('2020-01-01T00:00:00Z');
    await p.push(config());
    await drive('2020-01-01T00:06:00Z', '2020-01-01T00:06:00Z', 1);
    expect(await runs('often')).toEqual(['2020-01-01T00:05:00.000Z']);
    // A changed schedule counts from its push: what was due before it does not fire.
    const changed = config();
    (changed.schedules as { cron: string }[])[1]!.cron = '*/10 * * * *';
    await pushedAt('2020-01-01T00:00:00Z');
    await p.push(changed);
    await drive('2020-01-01T00:11:00Z', '2020-01-01T00:11:00Z', 1);
    expect(await runs('often')).toEqual([]);
    await p.push(config());
  });

  test('schedules, scheduleRuns and triggerSchedule over GraphQL; svc schedules list|trigger', async () => {
    const reader = await p.key(['schedules:read', 'operations:read']);
    const writer = await p.key(['schedules:read', 'schedules:write', 'operations:read']);
    const list = await p.gql(reader, `{ schedules { key operationKey cron timezone enabled nextRunAt } }`);
    expect(list.data.schedules.map((s: any) => [s.key, s.enabled])).toEqual([
      ['nightly', true],
      ['often', true],
      ['off', false],
    ]);
    expect(list.data.schedules[2].nextRunAt).toBeNull();
    const denied = await p.gql(reader, `mutation { triggerSchedule(key: "nightly") { executionId } }`);
    expect(denied.errors[0].message).toBe('missing required scope: schedules:write');
    const t = await p.gql(writer, `mutation { triggerSchedule(key: "off") { scheduleKey manual executionId status } }`);
    expect(t.data.triggerSchedule).toMatchObject({ scheduleKey: 'off', manual: true, status: 'pending' });
    expect((await waitStatus(p, writer, t.data.triggerSchedule.executionId)).status).toBe('completed');
    const history = await p.gql(
      reader,
      `{ scheduleRuns(scheduleKey: "off") { scheduleKey manual executionId status } }`,
    );
    expect(history.data.scheduleRuns).toEqual([
      { scheduleKey: 'off', manual: true, executionId: t.data.triggerSchedule.executionId, status: 'completed' },
    ]);
    const unknown = await p.gql(writer, `mutation { triggerSchedule(key: "nope") { executionId } }`);
    expect(unknown.errors[0].extensions.code).toBe('NOT_FOUND');

    const listed = await cli(server, p.ownerKey, 'schedules', 'list', '--project', p.projectId, '--json');
    expect(listed.json.schedules.find((s: any) => s.key === 'nightly')).toMatchObject({
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      enabled: true,
    });
    const fired = await cli(server, p.ownerKey, 'schedules', 'trigger', 'often', '--project', p.projectId, '--json');
    expect(fired.code).toBe(0);
    expect(fired.json).toMatchObject({ scheduleKey: 'often', manual: true });
    expect((await waitStatus(p, writer, fired.json.executionId)).resultJson).toEqual({ fired: fired.json.fireAt });
  });
});
