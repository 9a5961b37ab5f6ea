import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect } from 'node:net';
import type { TestServer } from '../support/server.ts';
import { startGqlProject, type GqlProject } from '../graphql/helpers.ts';
import { buildApi } from '../../src/http/api.ts';

let server: TestServer;
let p: GqlProject;
let pk: string;

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ]));
});
afterAll(() => server.stop());

const MB = 1024 * 1024;

/**
 * Sends a chunked body of up to `total` bytes over a raw socket, one 64 KB chunk at a time, and
 * stops as soon as an answer arrives (or the server closes). Returns the answer and how much of
 * the body had been handed to the socket by then.
 */
async function sendChunked(
  method: string,
  path: string,
  headers: Record<string, string>,
  total: number,
): Promise<{ status: number; body: string; sent: number }> {
  const url = new URL(server.apiUrl);
  const socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((ok, fail) => socket.once('connect', ok).once('error', fail));
  let received = '';
  let ended = false;
  const answered = new Promise<void>((ok) => {
    socket.on('data', (d) => {
      received += d.toString('latin1');
      if (/\r\n\r\n/.test(received)) ok();
    });
    socket.on('close', () => {
      ended = true;
      ok();
    });
    socket.on('error', () => {
      ended = true;
      ok();
    });
  });
  let done = false;
  void answered.then(() => (done = true));
  const head = [
    `${method} ${path} HTTP/1.1`,
    `Host: ${url.host}`,
    'Transfer-Encoding: chunked',
    'Content-Type: application/json',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.write(head.join('\r\n') + '\r\n\r\n');
  const chunk = Buffer.alloc(64 * 1024, 'x');
  chunk.write('{"query":"');
  let sent = 0;
  while (sent < total && !done && !ended) {
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    sent += chunk.length;
    if (!socket.write(frame)) await Promise.race([new Promise((ok) => socket.once('drain', ok)), answered]);
    chunk.fill('x', 0, 10);
  }
  if (!done && !ended) socket.write('0\r\n\r\n');
  await Promise.race([answered, Bun.sleep(30_000)]);
  // Let the rest of a small answer arrive.
  await Bun.sleep(50);
  socket.destroy();
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
  return { status, body: received.slice(received.indexOf('\r\n\r\n') + 4), sent };
}

describe('request bodies are counted while they stream', () => {
  test('a 50 MB chunked body to /graphql is refused with 413 after little more than the 1 MB limit', async () => {
    const r = await sendChunked('POST', '/graphql', { 'x-api-key': pk }, 50 * MB);
    expect(r.status).toBe(413);
    expect(r.body).toContain('PAYLOAD_TOO_LARGE');
    // Socket buffers on both sides hold a few MB at most; buffering the body would take all 50.
    expect(r.sent).toBeLessThan(16 * MB);
    // The service is not stalled.
    expect((await p.gql(pk, '{ _schemaVersion }')).status).toBe(200);
  }, 60_000);

  test('a 50 MB chunked body to a control-plane endpoint is refused with 413 without reading it all', async () => {
    const r = await sendChunked(
      'POST',
      `/v1/control/projects/${p.projectId}/config`,
      { authorization: `Bearer ${server.rootToken}` },
      50 * MB,
    );
    expect(r.status).toBe(413);
    expect(
      JSON.parse(
        r.body
          .trim()
          .replace(/^[0-9a-f]+\r\n/, '')
          .replace(/\r\n0\r\n$/, ''),
      ),
    ).toMatchObject({ error: 'PAYLOAD_TOO_LARGE' });
    // 16 MB limit + socket buffers; how much more the client hands over before it sees the answer
    // depends on how busy the machine is, but buffering the body would take all 50.
    expect(r.sent).toBeLessThan(40 * MB);
  }, 60_000);

  test('a declared Content-Length over the limit is refused before the body is sent', async () => {
    const res = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pk },
      body: JSON.stringify({ query: `{ _schemaVersion } #${'x'.repeat(2 * MB)}` }),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
  });

  test('no route reads past its limit: every route that takes a body answers 413, the others answer unread', async () => {
    const routes = buildApi(server.svc).routes.filter((r) => ['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method));
    expect(routes.length).toBeGreaterThan(10);
    const refused: string[] = [];
    for (const r of routes) {
      const path = r.path.replace(/:id/g, p.projectId).replace(/:[A-Za-z]+/g, 'x');
      const auth: Record<string, string> =
        path === '/graphql' ? { 'x-api-key': pk } : { authorization: `Bearer ${server.rootToken}` };
      const res = await sendChunked(r.method, path, auth, 50 * MB);
      expect(`${r.method} ${r.path} ${res.status}`).toMatch(/ [1-4]\d\d$/);
      // Under the whole 50 MB: the answer came before the body ended (limits are 1 or 16 MB; the
      // rest is socket buffers and how quickly a busy client notices the answer).
      expect(res.sent).toBeLessThan(40 * MB);
      if (res.status === 413) refused.push(`${r.method} ${r.path}`);
    }
    // Those without a body (enable, disable, cancel, trigger, rotate, logout, DELETE) answer before reading
    // anything, as does the upload, which refuses the root token (it takes API keys) unread, and
    // the signed upload URL, which refuses an unknown upload id and token unread.
    expect(refused.sort()).toEqual(
      routes
        .map((r) => `${r.method} ${r.path}`)
        .filter(
          (r) =>
            !/\/(disable|enable|cancel|trigger|signing-secret\/rotate|api\/logout)$|^DELETE |^POST \/api\/files\/upload$|^PUT \/api\/files\/uploads\/:id$/.test(
              r,
            ),
        )
        .sort(),
    );
  }, 120_000);

  test('bodies within the limit still work, chunked or not', async () => {
    const body = JSON.stringify({ query: '{ _schemaVersion }' });
    const stream = new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode(body)), c.close()) });
    const chunked = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pk },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(200);
    const made = await fetch(`${server.apiUrl}/v1/control/projects`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.rootToken}` },
      body: JSON.stringify({ name: 'x' }),
    });
    // The root token may not create projects: the body was read and the route answered.
    expect(made.status).toBe(403);
  });
});
