import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tempDir } from '../support/tmp.ts';
import { selfSignedCert } from '../support/tls.ts';
import { eventually } from '../support/eventually.ts';
import type { Server } from 'bun';
import { readFileSync, rmSync } from 'node:fs';
import { EgressError, fetchCapped, isPublicAddress, post } from '../../src/operations/egress.ts';
import { endpoint, opsProject, waitStatus, type Endpoint } from './support.ts';

let ep: Endpoint;
const servers: TestServer[] = [];

beforeAll(() => {
  ep = endpoint({
    '/ok': () => Response.json({ ok: true }),
    // Only the production test's operations call this path: a port reused from an earlier file
    // may still get calls from that file's lingering executions, which must not count here.
    '/prod-ok': () => Response.json({ ok: true }),
    '/big': () => new Response('x'.repeat(2 * 1024 * 1024)),
    '/hang': (req) =>
      new Promise<Response>((resolve) => req.signal.addEventListener('abort', () => resolve(new Response('gone')))),
    '/hop': () =>
      new Response(null, { status: 307, headers: { location: ep.url.replace('127.0.0.1', '127.0.0.2') + '/ok' } }),
  });
});

afterAll(async () => {
  ep.stop();
  await Promise.all(servers.map((s) => s.stop()));
});

describe('SSRF rules', () => {
  test('address classes', () => {
    for (const ip of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ]) {
      expect(`${ip} ${isPublicAddress(ip)}`).toBe(`${ip} false`);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111'])
      expect(`${ip} ${isPublicAddress(ip)}`).toBe(`${ip} true`);
  });

  test('a redirect to a refused address is refused at that hop', async () => {
    // Only 127.0.0.1 counts as public here, so the first hop goes out and the redirect does not.
    const policy = { publicOnly: true, allowed: (ip: string) => ip === '127.0.0.1' };
    const first = await post(`${ep.url}/ok`, '{}', {}, AbortSignal.timeout(5000), policy);
    expect(first.status).toBe(200);
    const err = await post(`${ep.url}/hop`, '{}', {}, AbortSignal.timeout(5000), policy).catch((e) => e);
    expect(err).toBeInstanceOf(EgressError);
    expect(err.reason).toBe('address_not_allowed');
    // A name resolving to a refused address is refused after resolution.
    const named = await post('http://svc-test.invalid/x', '{}', {}, AbortSignal.timeout(5000), {
      publicOnly: true,
      resolve: async () => ['10.0.0.7'],
    }).catch((e) => e);
    expect(named.reason).toBe('address_not_allowed');
  });

  test('production refuses loopback, localhost (after DNS) and metadata endpoints; SVC_OPERATIONS_ALLOW_PRIVATE=1 allows them', async () => {
    const prod = await startTestServer({ SVC_ENV: 'production', SVC_OPERATIONS_POLL_MS: '50' });
    servers.push(prod);
    const p = await opsProject(prod, 'prod');
    const port = new URL(ep.url).port;
    await p.push({
      operations: [
        { key: 'loop', endpoint: `${ep.url}/prod-ok` },
        { key: 'named', endpoint: `http://localhost:${port}/prod-ok` },
        { key: 'metadata', endpoint: 'http://169.254.169.254/latest/meta-data/' },
      ],
    });
    const key = await p.key(['operations:execute', 'operations:read']);
    const prodCalls = () => ep.calls.filter((c) => c.path === '/prod-ok').length;
    for (const op of ['loop', 'named', 'metadata']) {
      const r = await p.gql(key, `mutation { executeOperation(key: "${op}") { id } }`);
      const done = await waitStatus(p, key, r.data.executeOperation.id);
      expect(`${op}: ${done.status} ${done.errorJson.reason}`).toBe(`${op}: failed address_not_allowed`);
    }
    expect(prodCalls()).toBe(0);

    const open = await startTestServer({
      SVC_ENV: 'production',
      SVC_OPERATIONS_ALLOW_PRIVATE: '1',
      SVC_OPERATIONS_POLL_MS: '50',
    });
    servers.push(open);
    const q = await opsProject(open, 'open');
    await q.push({ operations: [{ key: 'loop', endpoint: `${ep.url}/prod-ok` }] });
    const k2 = await q.key(['operations:execute', 'operations:read']);
    const r = await q.gql(k2, `mutation { executeOperation(key: "loop") { id } }`);
    expect((await waitStatus(q, k2, r.data.executeOperation.id)).status).toBe('completed');
  }, 30_000);

  test('every hop, https too, connects to the address that was checked: a second DNS answer (rebinding) is never used', async () => {
    // A certificate for a name no real DNS answers: only a pinned connection can reach it.
    const dir = tempDir('svc-pin-');
    const { made, cert, key } = selfSignedCert(dir, '/CN=svc-pinned.test', 'DNS:svc-pinned.test');
    expect(made.exitCode).toBe(0);
    const ca = readFileSync(cert, 'utf8');
    const hosts: string[] = [];
    const site: Server<unknown> = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      tls: { cert: ca, key: readFileSync(key, 'utf8') },
      fetch(req): Response {
        hosts.push(req.headers.get('host')!);
        const path = new URL(req.url).pathname;
        if (path === '/hop')
          return new Response(null, { status: 307, headers: { location: `https://svc-pinned.test:${site.port}/ok` } });
        return Response.json({ pinned: true });
      },
    });
    rmSync(dir, { recursive: true, force: true });
    try {
      // The first answer per hop is the checked one; any later lookup would get a private address.
      let lookups = 0;
      const policy = {
        publicOnly: true,
        allowed: (ip: string) => ip === '127.0.0.1',
        resolve: async () => (++lookups % 2 === 1 ? ['127.0.0.1'] : ['10.9.9.9']),
      };
      const direct = await fetchCapped(`https://svc-pinned.test:${site.port}/ok`, {
        method: 'POST',
        body: '{}',
        headers: {},
        signal: AbortSignal.timeout(10_000),
        policy,
        ca,
      });
      expect({ status: direct.status, body: JSON.parse(direct.body), lookups }).toEqual({
        status: 200,
        body: { pinned: true },
        lookups: 1,
      });
      // A redirect hop is resolved (once), checked and pinned the same way.
      lookups = 0;
      const hopped = await fetchCapped(`https://svc-pinned.test:${site.port}/hop`, {
        method: 'POST',
        body: '{}',
        headers: {},
        signal: AbortSignal.timeout(10_000),
        policy: { ...policy, resolve: async () => (++lookups, ['127.0.0.1']) },
        ca,
      });
      expect({ status: hopped.status, lookups }).toEqual({ status: 200, lookups: 2 });
      // The certificate is still checked against the name (SNI and verification use it).
      const wrongName = await fetchCapped(`https://other.test:${site.port}/ok`, {
        method: 'POST',
        body: '{}',
        headers: {},
        signal: AbortSignal.timeout(10_000),
        policy: { ...policy, resolve: async () => ['127.0.0.1'] },
        ca,
      }).catch((e) => e);
      expect(wrongName).toBeInstanceOf(Error);
      expect(hosts.every((h) => h === `svc-pinned.test:${site.port}`)).toBe(true);
      // Plain http is pinned as well, with the name in Host.
      const plain = await post(
        `http://svc-plain.test:${new URL(ep.url).port}/ok`,
        '{}',
        {},
        AbortSignal.timeout(10_000),
        { publicOnly: true, allowed: (ip) => ip === '127.0.0.1', resolve: async () => ['127.0.0.1'] },
      );
      expect(plain.status).toBe(200);
      expect(ep.calls.at(-1)!.headers.get('host')).toBe(`svc-plain.test:${new URL(ep.url).port}`);
      // The pinned path keeps the 1 MiB cut and aborts a call in flight.
      const pin = { publicOnly: true, allowed: (ip: string) => ip === '127.0.0.1', resolve: async () => ['127.0.0.1'] };
      const big = await post(
        `http://svc-plain.test:${new URL(ep.url).port}/big`,
        '{}',
        {},
        AbortSignal.timeout(10_000),
        pin,
      );
      expect({ truncated: big.truncated, length: big.body.length }).toEqual({ truncated: true, length: 1024 * 1024 });
      const stop = new AbortController();
      const hanging = post(`http://svc-plain.test:${new URL(ep.url).port}/hang`, '{}', {}, stop.signal, pin).catch(
        (e) => e,
      );
      await eventually(() => ep.calls.some((c) => c.path === '/hang'), 10_000);
      stop.abort('cancelled');
      // Rejected with the signal's reason, as fetch() does.
      expect(await hanging).toBe('cancelled');
      await eventually(() => ep.aborted.has('/hang'), 10_000);
    } finally {
      site.stop(true);
    }
  });
});
