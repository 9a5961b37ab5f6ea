import { standbyUnavailable, startStandbyPair, stopPairIn } from './standby.ts';

/**
 * A primary and hot standby that outlive this process, for a whole test run on them
 * (.ci/replicas; locally the same):
 *
 *   eval "$(bun test/support/standby-cli.ts start [--apply-delay-ms 150])"   # sets SVC_STANDBY_DIR, DATABASE_URL, DATABASE_READ_URL
 *   bun test test/content test/realtime test/graphql
 *   bun test/support/standby-cli.ts stop "$SVC_STANDBY_DIR"
 *
 * `start` prints shell assignments only (quoted); `stop` stops both clusters and removes their
 * folder (a `trap` in the caller, so a failed run leaves neither). Without PostgreSQL 15's
 * binaries `start` says why on stderr and exits 3.
 */
const [cmd, arg, value] = process.argv.slice(2);
const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

if (cmd === 'start') {
  const why = standbyUnavailable();
  if (why) {
    // On stderr: stdout is eval'ed. Exit 3: the caller skips (or fails under CI) saying why.
    console.error(why);
    process.exit(3);
  }
  // The suites start dozens of services one after another, each with several pools: the CI
  // server runs at 300 (.ci/run) for the same reason.
  const delay = arg === '--apply-delay-ms' ? Number(value) : 0;
  if (!Number.isFinite(delay) || delay < 0) throw new Error('--apply-delay-ms takes a number of milliseconds');
  const pair = await startStandbyPair({ maxConnections: 300, applyDelayMs: delay });
  console.log(`export SVC_STANDBY_DIR=${quote(pair.dir)}`);
  console.log(`export DATABASE_URL=${quote(pair.primaryUrl)}`);
  console.log(`export DATABASE_READ_URL=${quote(pair.standbyUrl)}`);
} else if (cmd === 'stop' && arg) {
  stopPairIn(arg);
} else {
  console.error('usage: bun test/support/standby-cli.ts start [--apply-delay-ms N] | stop <SVC_STANDBY_DIR>');
  process.exit(2);
}
