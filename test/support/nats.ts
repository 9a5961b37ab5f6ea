import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/store/ports.ts';

/**
 * A NATS server with JetStream of the test's own (Debian's nats-server), on a free port with its
 * own store, so a test may kill it and bring it back without touching anyone else's.
 */
export interface TestNats {
  url: string;
  /** kill -9, as a crash would. */
  kill(): Promise<void>;
  /** Starts again on the same port and store (JetStream's streams survive). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export const NATS_SERVER = process.env.SVC_TEST_NATS_SERVER ?? '/usr/sbin/nats-server';

export async function startNats(): Promise<TestNats> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'svc-nats-'));
  let proc: ReturnType<typeof Bun.spawn> | undefined;
  const up = async () => {
    proc = Bun.spawn([NATS_SERVER, '-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], {
      stdout: 'ignore',
      stderr: 'ignore',
    });
    const end = Date.now() + 10_000;
    for (;;) {
      try {
        const s = await Bun.connect({ hostname: '127.0.0.1', port, socket: { data() {} } });
        s.end();
        return;
      } catch {
        if (Date.now() > end) throw new Error('nats-server did not start');
        await Bun.sleep(50);
      }
    }
  };
  await up();
  const down = async (signal: 'SIGKILL' | 'SIGTERM') => {
    proc?.kill(signal);
    await proc?.exited;
    proc = undefined;
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    kill: () => down('SIGKILL'),
    restart: up,
    async stop() {
      await down('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
