/**
 * Preloaded into a service process by a bench (`bun --preload bench/loop-lag.ts`): measures how
 * late a 10 ms interval timer fires, i.e. how long the event loop was held, and appends every
 * delay over 5 ms to the file BENCH_LOOP_LAG_FILE as `<epoch ms> <delay ms>` lines. Unlike a
 * /health poll from another process, nothing else on the box (PostgreSQL, the bench's clients)
 * shows in it.
 */
import { appendFileSync } from 'node:fs';

const file = process.env.BENCH_LOOP_LAG_FILE;
if (file) {
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    const lag = now - last - 10;
    last = now;
    if (lag > 5) appendFileSync(file, `${Date.now()} ${lag.toFixed(1)}\n`);
  }, 10).unref();
}
