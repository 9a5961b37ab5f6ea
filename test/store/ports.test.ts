import { expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort } from '../../src/store/ports.ts';

test('freePort: a port below the ephemeral range (no outgoing connection can take it), free to listen on', async () => {
  const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
  for (const port of ports) {
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(low!);
  }
  // Taken ports are skipped: with one held, the ports found are still all bindable.
  const held = createServer();
  await new Promise<void>((r) => held.listen(ports[0], '127.0.0.1', r));
  const again = await freePort();
  expect(again).not.toBe(ports[0]);
  const srv = createServer();
  await new Promise<void>((r, j) => srv.once('error', j).listen(again, '127.0.0.1', r));
  await new Promise((r) => srv.close(r));
  await new Promise((r) => held.close(r));
  // Ports to avoid are never answered, though free.
  for (let i = 0; i < 20; i++) expect(ports).not.toContain(await freePort(ports));
});
