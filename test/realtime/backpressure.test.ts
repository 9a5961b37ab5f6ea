import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { eventsSocket } from './support.ts';

let server: TestServer;
let p: GqlProject;

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }], 'rt-slow');
});
afterAll(() => server.stop());

const status = async () =>
  (await (await fetch(`${server.gatewayUrl}/api/realtime/status`)).json()) as { channels: number; clients: number };

describe('slow consumers', () => {
  test('a client that stops reading is dropped once its buffer passes the bound; a reading client keeps receiving', async () => {
    const key = await p.key('sk', ['operations:read']);
    const child = Bun.spawn([process.execPath, join(import.meta.dir, 'slow-consumer.ts'), server.gatewayUrl, key], {
      stdout: 'pipe',
      stderr: 'inherit',
    });
    const healthy = await eventsSocket(server.gatewayUrl, { apiKey: key });
    healthy.send({ type: 'subscribe', channel: 'jobs:*' });
    try {
      const out = child.stdout.getReader();
      expect(new TextDecoder().decode((await out.read()).value)).toContain('ready');
      expect(await status()).toEqual({ channels: 1, clients: 3 });
      child.kill('SIGSTOP');
      const blob = 'x'.repeat(64 * 1024);
      let sent = 0;
      // Each event is 64 KiB; the kernel's socket buffers absorb a few MiB before the gateway's
      // own bound (1 MiB per client) is reached.
      while ((await status()).clients > 1 && sent < 2000) {
        await server.svc.bus.publish({
          type: 'execution.changed',
          projectId: p.projectId,
          executionId: `exe_${sent}`,
          operationKey: 'op',
          status: 'running',
          progressPct: 1,
          progressMessage: null,
          resultJson: { blob },
          errorJson: null,
        });
        sent++;
        if (sent % 20 === 0) await Bun.sleep(50);
      }
      expect(await status()).toEqual({ channels: 1, clients: 1 });
      expect(sent).toBeGreaterThan(16); // more than the 1 MiB bound went out before the drop
      // The healthy client heard every event.
      const end = Date.now() + 10_000;
      while (healthy.frames.length < sent + 1 && Date.now() < end) await Bun.sleep(50);
      expect(healthy.frames.length).toBe(sent + 1);
    } finally {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      healthy.ws.close();
    }
  }, 60_000);
});
