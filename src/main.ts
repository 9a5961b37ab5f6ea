import { readSettings } from './env.ts';
import { startServer } from './server.ts';
import { markRunning } from './store/data-dir.ts';

/** `npm start`: the API and the realtime gateway in one process (CONTRACT §1–2). */
async function main(): Promise<void> {
  let settings: ReturnType<typeof readSettings>;
  try {
    settings = readSettings();
  } catch (err) {
    console.error(`svc: ${(err as Error).message}`);
    process.exit(2);
  }
  const deadline = setTimeout(() => {
    console.error('svc: start-up took longer than 60 s; giving up');
    process.exit(1);
  }, 60_000);
  let running: Awaited<ReturnType<typeof startServer>>;
  try {
    running = await startServer(settings);
  } catch (err) {
    console.error(`svc: ${(err as Error).message.split('\n')[0]}`);
    process.exit(1);
  } finally {
    clearTimeout(deadline);
  }
  const { svc } = running;
  // So `svc data rm` refuses to remove the data dir under this process.
  const unmark = markRunning(settings.dataDir);
  console.log(`svc ${settings.role} ready`);
  if (running.apiUrl) console.log(`  API:      ${settings.baseUrl}  (GraphQL at ${settings.baseUrl}/graphql)`);
  if (running.gatewayUrl) console.log(`  Realtime: ${settings.realtimeUrl}`);
  console.log(`  Database: ${svc.embedded ? `embedded PostgreSQL in ${svc.embedded.dir}` : 'DATABASE_URL'}`);
  if (svc.embedded?.note) console.log(`            (${svc.embedded.note})`);
  const w = running.warmup;
  if (w?.requests)
    console.log(
      `  Warm-up:  ${w.requests} reads of ${w.reads} trusted documents in ${Math.round(w.ms)} ms (SVC_WARMUP_MS)`,
    );
  if (svc.rootTokenNotice) console.log(`  Root token (shown once): ${svc.rootTokenNotice}`);
  else console.log(`  Root token: ${settings.rootToken ? 'from SVC_ROOT_TOKEN' : `${settings.dataDir}/root-token`}`);

  let signals = 0;
  const shutdown = (sig: string) => {
    signals++;
    if (signals > 1) process.exit(1);
    console.log(`svc: ${sig}, shutting down`);
    running
      .stop()
      .then(() => {
        unmark();
        process.exit(0);
      })
      .catch((err) => {
        console.error(`svc: shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // Under `npm start` (npm sets npm_lifecycle_event), npm passes SIGTERM on to its script, which
  // execs this process (package.json). Should npm die without doing so (SIGKILL, a crash), this
  // process is handed to another parent: stop then too, rather than serve on without a manager.
  // Started any other way (a shell's `&`, systemd, a container), the parent may come and go.
  if (process.env.npm_lifecycle_event) {
    const parent = process.ppid;
    const watch = setInterval(() => {
      if (process.ppid === parent) return;
      clearInterval(watch);
      shutdown('npm exited');
    }, 1000);
    watch.unref();
  }
}

await main();
