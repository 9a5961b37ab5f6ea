/**
 * The scenarios that start their own services and references (bench/fanout.ts,
 * bench/fanout-3proc.ts, bench/collab.ts, bench/read-replica.ts): their rows, figures, notes and
 * sections go to the run's state like the service rows'.
 */
import { collabFigures, collabLines, runCollab } from './collab.ts';
import { runFanout3 } from './fanout-3proc.ts';
import { runFanout } from './fanout.ts';
import { isFanout, type Options, type Scenario } from './options.ts';
import { runReadReplica } from './read-replica.ts';
import { state } from './state.ts';

/** Those of `scenarios` that run beside the service rather than on it, in the run's order. */
export async function runOwnServices(o: Options, scenarios: Scenario[]): Promise<void> {
  const fanout = scenarios.filter(isFanout);
  if (fanout.length) {
    const r = await runFanout(state.db!.url, fanout, o.quick);
    state.fanoutLines = r.lines;
    state.notes.push(...r.notes);
    for (const f of r.results) {
      const mode = f.name === 'fanout-sse' ? 'sse' : 'ws';
      if (f.svc?.cpuUsPerDelivery !== undefined)
        state.extraFigures[`${f.name}/cpu-us-per-delivery`] = {
          value: f.svc.cpuUsPerDelivery,
          unit: 'µs',
          errors: f.svc.failed + Math.max(0, f.svc.expected - f.svc.deliveries),
        };
      if (f.relay?.cpuUsPerDelivery !== undefined)
        state.extraFigures[`relay-${mode}/cpu-us-per-delivery`] = {
          value: f.relay.cpuUsPerDelivery,
          unit: 'µs',
          errors: f.relay.failed + Math.max(0, f.relay.expected - f.relay.deliveries),
        };
    }
  }
  if (scenarios.includes('fanout-3proc'))
    state.fanoutLines = [...state.fanoutLines, ...(await runFanout3(state.db!.url, o.quick))];
  if (scenarios.includes('collab')) {
    const c = await runCollab(state.db!.url, o.quick, o.profile === 'collab' ? 'collab' : undefined);
    if (c.profile) state.profiles.push(c.profile);
    state.collab = collabLines(c);
    Object.assign(state.extraFigures, collabFigures(c));
  }
  if (scenarios.includes('read-replica')) {
    const r = await runReadReplica(o);
    state.rows.push(...r.rows);
    state.notes.push(...r.notes);
    Object.assign(state.extraFigures, r.figures);
  }
}
