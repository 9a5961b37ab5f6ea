import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import { eventually } from '../support/eventually.ts';
import { spawnService, waitForReady } from '../support/process.ts';
import { endpoint, opsProject, type Endpoint, type OpsProject } from './support.ts';

/**
 * Issue 15 with real processes: three service processes (two `all`, one `worker`) run their
 * schedulers on one database at once, ticking every 20 ms so they race for each occurrence.
 * Every occurrence gets one schedule_runs row, one execution and one call of its operation.
 * The test process serves only the API (SVC_ROLE=api: no scheduler, no dispatcher of its own).
 */
const ROOT = join(import.meta.dir, '..', '..');
// Many schedules: a tick fires them one transaction each, so one process is still firing while
// another has already read them all as due (the window where only the primary key stops a double).
const SCHEDULES = Array.from({ length: 30 }, (_, i) => `s${i}`);
let server: TestServer;
let ep: Endpoint;
let p: OpsProject;
const procs: Subprocess[] = [];

beforeAll(async () => {
  server = await startTestServer({ SVC_ROLE: 'api' });
  ep = endpoint({ '/tick': (_r, body) => Response.json({ fired: body.input.fireAt }) });
  p = await opsProject(server, 'sched-procs');
}, 30_000);

afterAll(async () => {
  for (const proc of procs) proc.kill('SIGKILL');
  ep.stop();
  await server.stop();
});

/** What every spawned process shares with the test server: the database and the data folder (its vault key signs the calls). */
function env(): Record<string, string> {
  return {
    DATABASE_URL: server.databaseUrl,
    SVC_DATA_DIR: server.dataDir,
    SVC_ROOT_TOKEN: server.rootToken,
    SVC_BASE_URL: server.apiUrl,
    SVC_LOG: 'off',
    SVC_READ_POOL: '1',
    SVC_OPERATIONS_ALLOW_PRIVATE: '1',
    SVC_OPERATIONS_POLL_MS: '50',
    SVC_SCHEDULER_TICK_MS: '20',
  };
}

/** A worker serves no HTTP: it is ready when it says so. */
async function spawnWorker(): Promise<Subprocess> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) clean[k] = v;
  const proc = Bun.spawn([process.execPath, 'src/main.ts'], {
    cwd: ROOT,
    env: { ...clean, ...env(), SVC_ROLE: 'worker', PORT: '0', REALTIME_PORT: '0' },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  procs.push(proc);
  await waitForReady(proc, 60_000);
  // Keep reading what it prints so a full pipe never blocks it.
  void (async () => {
    const reader = proc.stdout.getReader();
    while (!(await reader.read()).done);
  })();
  void new Response(proc.stderr).text().then((t) => t && process.stderr.write(t));
  return proc;
}

interface Run {
  schedule_key: string;
  fire_at: Date;
  execution_id: string | null;
  status: string | null;
  input: { scheduleKey: string; fireAt: string; manual: boolean } | null;
}

async function runs(): Promise<Run[]> {
  return server.svc.sql<Run[]>`
    select r.schedule_key, r.fire_at, r.execution_id, e.status, e.input
    from schedule_runs r left join operation_executions e on e.id = r.execution_id
    where r.project_id = ${p.projectId} and not r.manual order by r.schedule_key, r.fire_at`;
}

const occurrence = (scheduleKey: string, fireAt: string) => `${scheduleKey} ${fireAt}`;

describe('schedules across processes', () => {
  test('three processes ticking on one database fire each occurrence once: one schedule_runs row, one execution, one call', async () => {
    const schedules = (enabled: boolean) =>
      SCHEDULES.map((key) => ({ key, operationKey: 'tick', cron: '* * * * *', enabled }));
    await p.push({
      operationBaseUrl: ep.url,
      operations: [{ key: 'tick', endpoint: '/tick' }],
      schedules: schedules(true),
    });
    // As if pushed an hour ago (no process runs a scheduler yet): each process's first tick
    // finds this minute's occurrence due, so the first one is raced for at start-up and the
    // second at the next minute boundary (five-field cron: nothing fires more often).
    await server.svc.sql`update schedules set updated_at = now() - interval '1 hour' where project_id = ${p.projectId}`;

    const started = await Promise.all([
      spawnService(env(), { role: 'all', cwd: ROOT, timeoutMs: 60_000 }),
      spawnService(env(), { role: 'all', cwd: ROOT, timeoutMs: 60_000 }),
      spawnWorker(),
    ]);
    for (const s of started) if ('proc' in s) procs.push(s.proc);

    // Two occurrences per schedule, each called (completed).
    let latest: Run[] = [];
    await eventually(async () => {
      latest = await runs();
      return SCHEDULES.every(
        (key) => latest.filter((r) => r.schedule_key === key && r.status === 'completed').length >= 2,
      );
    }, 180_000);

    // No new occurrence from here on; once the executions already made have ended, stop the
    // processes (SIGTERM: each finishes its tick and its dispatcher) so the rows are final.
    await p.push({
      operationBaseUrl: ep.url,
      operations: [{ key: 'tick', endpoint: '/tick' }],
      schedules: schedules(false),
    });
    await eventually(async () => {
      latest = await runs();
      return latest.every((r) => r.status !== null && !['pending', 'dispatched', 'running'].includes(r.status));
    }, 60_000);
    for (const proc of procs) proc.kill('SIGTERM');
    await Promise.all(procs.map((proc) => proc.exited));
    latest = await runs();

    // Calls of the endpoint, per occurrence.
    const calls = new Map<string, string[]>();
    for (const c of ep.calls.filter((x) => x.path === '/tick')) {
      expect(c.body.input.manual).toBe(false);
      const k = occurrence(c.body.input.scheduleKey, c.body.input.fireAt);
      calls.set(k, [...(calls.get(k) ?? []), c.body.executionId]);
    }

    for (const key of SCHEDULES) {
      const mine = latest.filter((r) => r.schedule_key === key);
      const fires = mine.map((r) => r.fire_at.getTime());
      expect(mine.length).toBeGreaterThanOrEqual(2);
      // One row per occurrence (the primary key), and no minute skipped between the first and the last.
      expect(new Set(fires).size).toBe(fires.length);
      for (let i = 1; i < fires.length; i++) expect(fires[i]! - fires[i - 1]!).toBe(60_000);
      for (const r of mine) {
        const at = r.fire_at.toISOString();
        // One execution per occurrence, naming it, and one call of the endpoint with it.
        expect(r.execution_id).not.toBeNull();
        expect(r.input).toEqual({ scheduleKey: key, fireAt: at, manual: false });
        expect(r.status).toBe('completed');
        expect(calls.get(occurrence(key, at))).toEqual([r.execution_id!]);
      }
    }
    // Nothing was called that has no row.
    expect([...calls.keys()].sort()).toEqual(
      latest.map((r) => occurrence(r.schedule_key, r.fire_at.toISOString())).sort(),
    );
    const [count] = await server.svc.sql<{ n: number }[]>`
      select count(*)::int as n from operation_executions where project_id = ${p.projectId} and trigger = 'schedule'`;
    expect(count!.n).toBe(latest.length);
  }, 300_000);
});
