/**
 * A process that compacts one room's stored document over and over (log.test's two-process
 * race): `bun test/collab/compact-loop.ts <database url> <room key> <ms>`. Prints its
 * compactor's counters as JSON when the time is up.
 */
import { Compactor } from '../../src/collab/compactor.ts';

const [url, room, ms] = process.argv.slice(2);
const compactor = new Compactor({ url: url!, retryMs: 0 });
// Its worker is up and connected once the first compaction answered.
await compactor.compact(room!);
console.log('ready');
const end = Date.now() + Number(ms);
while (Date.now() < end) {
  await compactor.compact(room!);
  await Bun.sleep(2);
}
await compactor.close();
console.log(JSON.stringify(compactor.stats));
process.exit(0);
