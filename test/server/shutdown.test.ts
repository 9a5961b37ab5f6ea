import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, type Socket } from 'node:net';
import { startTestServer, type TestServer } from '../support/server.ts';
import { spawnServiceBeside } from '../support/process.ts';

/**
 * Issue 27 item 14: SIGTERM with idle keep-alive connections (and connections that never sent
 * a full request) exits as soon as the in-flight requests are answered, instead of waiting for
 * the idle ones to time out (Bun's graceful stop waited ~10 s for them).
 */
let base: TestServer;

beforeAll(async () => {
  base = await startTestServer({ SVC_ROLE: 'worker' });
}, 60_000);
afterAll(() => base.stop());

async function open(port: number): Promise<{ s: Socket; received: () => string; closed: () => boolean }> {
  const s = connect(port, '127.0.0.1');
  await new Promise((r) => s.once('connect', r));
  let got = '';
  let closed = false;
  s.on('data', (d) => (got += d));
  s.on('close', () => (closed = true));
  s.on('end', () => (closed = true));
  s.on('error', () => {});
  return { s, received: () => got, closed: () => closed };
}

describe('SIGTERM', () => {
  test('idle keep-alive connections are closed at once; the in-flight request is answered; the process exits', async () => {
    const { proc, url } = await spawnServiceBeside(base, 'api', { SVC_READ_POOL: '1' });
    const port = Number(new URL(url).port);
    // Two keep-alive connections that were answered once and stay open, one that sent nothing,
    // one that sent half a request line.
    const idle = [await open(port), await open(port), await open(port), await open(port)];
    for (const c of idle.slice(0, 2)) {
      c.s.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
      while (!c.received().includes('"ok"')) await Bun.sleep(10);
    }
    idle[3]!.s.write('GET /health HTTP/1.1\r\nHo');
    // In flight: headers sent, the body comes after SIGTERM.
    const slow = await open(port);
    const body = '{"query":"{ __typename }"}';
    slow.s.write(
      `POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    await Bun.sleep(200);
    let exited: number | null = null;
    void proc.exited.then((code) => (exited = code));
    proc.kill('SIGTERM');
    // The keep-alive connections close although the in-flight request still waits for its body.
    const end = Date.now() + 5_000;
    while (!(idle[0]!.closed() && idle[1]!.closed()) && Date.now() < end) await Bun.sleep(20);
    expect([idle[0]!.closed(), idle[1]!.closed()]).toEqual([true, true]);
    expect(exited).toBeNull();
    slow.s.write(body.slice(5));
    // Answered (no key: 401), then the process exits, well before the idle timeout of 10 s that
    // the connection which sent nothing held it for before.
    const code = await Promise.race([proc.exited, Bun.sleep(8_000).then(() => 'still running')]);
    expect(slow.received()).toStartWith('HTTP/1.1 401');
    expect(code).toBe(0);
    for (const c of [...idle, slow]) c.s.destroy();
  }, 60_000);
});
