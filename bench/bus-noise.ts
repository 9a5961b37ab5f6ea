/**
 * Other projects' traffic on the event bus for `fanout-3proc`: `perSec` record.changed events a
 * second, each for one of `projects` projects in turn, published the way the service's own
 * writes publish them (NOTIFY on the PostgreSQL bus; the JetStream stream on the NATS bus), in
 * batches every 100 ms. Runs until SIGTERM.
 */
import { readFileSync } from 'node:fs';
import postgres from 'postgres';
import { connect } from 'nats';
import { parseBusUrl, subjectOf } from '../src/bus/nats/transport.ts';

const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as {
  databaseUrl: string;
  busUrl?: string;
  projects: number;
  perSec: number;
};
const TICK_MS = 100;
const perTick = Math.max(1, Math.round((cfg.perSec * TICK_MS) / 1000));
let next = 0;
const batch = () =>
  Array.from({ length: perTick }, () => {
    const p = `noise-${next++ % cfg.projects}`;
    return {
      type: 'record.changed' as const,
      projectId: p,
      action: 'updated' as const,
      recordId: `r${next}`,
      modelKey: 'note',
      userId: null,
    };
  });

let stop = false;
process.on('SIGTERM', () => (stop = true));

if (cfg.busUrl) {
  const { servers, prefix } = parseBusUrl(cfg.busUrl);
  const nc = await connect({ servers });
  const js = nc.jetstream();
  const enc = new TextEncoder();
  while (!stop) {
    const at = Date.now();
    await Promise.all(
      batch().map((e) => js.publish(subjectOf(e, prefix), enc.encode(JSON.stringify({ o: 'noise', at, e })))),
    );
    await Bun.sleep(Math.max(0, TICK_MS - (Date.now() - at)));
  }
  await nc.close();
} else {
  const sql = postgres(cfg.databaseUrl, { max: 1, onnotice: () => {} });
  while (!stop) {
    const at = Date.now();
    const events = batch();
    // As the service sends them: as many events per NOTIFY as fit 7,500 bytes.
    for (let i = 0; i < events.length; i += 40) {
      await sql`select pg_notify('svc_bus', ${JSON.stringify({ origin: 'noise', events: events.slice(i, i + 40) })})`;
    }
    await Bun.sleep(Math.max(0, TICK_MS - (Date.now() - at)));
  }
  await sql.end();
}
process.exit(0);
