import { readSettings } from './env.ts';
import { startServer } from './server.ts';

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
  console.log(`svc ${settings.role} ready`);
  if (running.apiUrl) console.log(`  API:      ${settings.baseUrl}  (GraphQL at ${settings.baseUrl}/graphql)`);
  if (running.gatewayUrl) console.log(`  Realtime: ${settings.realtimeUrl}`);
  console.log(`  Database: ${svc.embedded ? `embedded PostgreSQL in ${svc.embedded.dir}` : 'DATABASE_URL'}`);
  if (svc.embedded?.note) console.log(`            (${svc.embedded.note})`);
  if (svc.rootTokenNotice) console.log(`  Root token (shown once): ${svc.rootTokenNotice}`);
  else console.log(`  Root token: ${settings.rootToken ? 'from SVC_ROOT_TOKEN' : `${settings.dataDir}/root-token`}`);

  let signals = 0;
  const shutdown = (sig: string) => {
    signals++;
    if (signals > 1) process.exit(1);
    console.log(`svc: ${sig}, shutting down`);
    running
      .stop()
      .then(() => process.exit(0))
      .catch((err) => {
        console.error(`svc: shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

await main();
