/**
 * The `provision` scenario's rows on the running service: the fleet set up by
 * bench/provision-scenario.ts, the rotating read against the one-project read, and the heap per
 * project from bench/fleet-memory.ts.
 */
import { join } from 'node:path';
import { measure, body, preflight } from './measure.ts';
import { planFor, type Options } from './options.ts';
import { childResult, rssWindow, startChild } from './procs.ts';
import { cacheEntries, FLEET_READ_DOC, setupFleet } from './provision-scenario.ts';
import type { Seeded } from './seed.ts';
import { state } from './state.ts';
import type { Target } from './targets.ts';

/**
 * Scenario `provision` (issue 18): provisioning rate beside bare project creates, then the same
 * key-only read rotating over every provisioned project against one project (the reference),
 * with the shared fleet schema cache's entries from /metrics and the process' RSS.
 */
export async function runProvision(o: Options, svc: Target & { rootToken: string }): Promise<void> {
  const s = await seedFleetOwner(svc);
  const fleet = await setupFleet(svc.url, s, () => rssWindow(svc.child.pid));
  state.rows.push(...fleet.rows);
  state.notes.push(...fleet.notes);
  const one = [fleet.rotation[0]!];
  await preflight(svc.endpoint, body(FLEET_READ_DOC), one[0]!);
  await measure('provision/read-1', 'read', true, svc, planFor(o, svc.endpoint, body(FLEET_READ_DOC), one));
  const before = await cacheEntries(svc.url);
  await measure(
    `provision/read-${fleet.rotation.length}`,
    'read',
    false,
    svc,
    planFor(o, svc.endpoint, body(FLEET_READ_DOC), fleet.rotation),
  );
  const after = await cacheEntries(svc.url);
  state.notes.push(await fleetMemory());
  const r1 = state.rows.find((r) => r.name === 'provision/read-1')?.result;
  const rn = state.rows.find((r) => r.name === `provision/read-${fleet.rotation.length}`)?.result;
  if (r1 && rn) {
    state.notes.push(
      `provision/read-${fleet.rotation.length}: key-only read rotating over ${fleet.rotation.length} provisioned projects = ${(rn.rps / r1.rps).toFixed(2)} × the same read on one project (req/s), peak RSS ${rn.rssMb?.toFixed(0) ?? 'n/a'} MB against ${r1.rssMb?.toFixed(0) ?? 'n/a'} MB; ` +
        `GraphQL cache entries after the rotation: ${JSON.stringify(after)} (before it: ${JSON.stringify(before)}) — one shared schema and one compiled document serve every project`,
    );
  }
}

/** bench/fleet-memory.ts in its own process (its heap is measured): heap per project, members against standalone. */
async function fleetMemory(): Promise<string> {
  process.stderr.write(
    'bench: provision/memory (1,000 members against 1,000 standalone projects, bench/fleet-memory.ts) … ',
  );
  const child = startChild(process.execPath, [join(import.meta.dir, 'fleet-memory.ts'), '1000'], {
    label: 'fleet-memory',
    cwd: join(import.meta.dir, '..'),
    env: { DATABASE_URL: state.db!.url },
  });
  const r = await childResult<{
    projects: number;
    memberBytesPerProject: number;
    standaloneBytesPerProject: number;
    memberTotalMb: number;
    standaloneTotalMb: number;
    sharedSchemas: number;
  }>(child, 'MEMJSON', 300_000);
  if (!r) {
    process.stderr.write('failed\n');
    return `provision/memory: bench/fleet-memory.ts printed no result: ${child.tail().slice(0, 160)}`;
  }
  process.stderr.write(
    `${(r.memberBytesPerProject / 1024).toFixed(1)} KB against ${(r.standaloneBytesPerProject / 1024).toFixed(1)} KB per project\n`,
  );
  return `provision/memory: heap after one read per project (6 models, 40 fields): ${r.projects} fleet members on one version +${r.memberTotalMb.toFixed(1)} MB (${(r.memberBytesPerProject / 1024).toFixed(1)} KB per project, ${r.sharedSchemas} shared schema), ${r.projects} standalone projects with the same models +${r.standaloneTotalMb.toFixed(1)} MB (${(r.standaloneBytesPerProject / 1024).toFixed(1)} KB per project) = ${(r.standaloneBytesPerProject / Math.max(1, r.memberBytesPerProject)).toFixed(1)} × the member cost`;
}

/** The bench tenant's owner key (seedProject made it) is all the fleet part needs. */
async function seedFleetOwner(svc: Target & { rootToken: string }): Promise<Seeded> {
  if (!state.fleetSeed) throw new Error('the service was not seeded');
  void svc;
  return state.fleetSeed;
}
