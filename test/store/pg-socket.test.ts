import { expect, test } from 'bun:test';
import { createServer } from 'node:net';
import { connect } from '../../src/store/db.ts';

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

test('a URL of several hosts: our pools try the next host when one refuses, as postgres.js does', async () => {
  const url = new URL(process.env.DATABASE_URL!);
  const dead = await closedPort();
  // WHATWG URL cannot hold a host list: the string is put together by hand.
  const hosts = `127.0.0.1:${dead},${url.hostname}:${url.port || 5432}`;
  const auth = url.username ? `${url.username}${url.password ? `:${url.password}` : ''}@` : '';
  const sql = connect(`postgres://${auth}${hosts}${url.pathname}`, { max: 1, pool: 'test-multi-host' });
  try {
    let answered: number | undefined;
    for (let i = 0; i < 4 && answered === undefined; i++) {
      try {
        answered = (await sql`select 1 as x`)[0]!.x as number;
      } catch (err) {
        expect((err as { code?: string }).code).toBe('ECONNREFUSED');
      }
    }
    expect(answered).toBe(1);
  } finally {
    await sql.end({ timeout: 1 });
  }
}, 20_000);
