import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { EgressError, isPublicAddress, post } from '../../src/operations/egress.ts';
import { endpoint, opsProject, waitStatus, type Endpoint } from './support.ts';

let ep: Endpoint;
const servers: TestServer[] = [];

beforeAll(() => {
  ep = endpoint({
    '/ok': () => Response.json({ ok: true }),
    // Only the production test's operations call this path: a port reused from an earlier file
    // may still get calls from that file's lingering executions, which must not count here.
    '/prod-ok': () => Response.json({ ok: true }),
    '/hop': () => new Response(null, { status: 307, headers: { location: ep.url.replace('127.0.0.1', '127.0.0.2') + '/ok' } }),
  });
});

afterAll(async () => {
  ep.stop();
  await Promise.all(servers.map((s) => s.stop()));
});

describe('SSRF rules', () => {
  test('address classes', () => {
    for (const ip of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1']) {
      expect(`${ip} ${isPublicAddress(ip)}`).toBe(`${ip} false`);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) expect(`${ip} ${isPublicAddress(ip)}`).toBe(`${ip} true`);
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
    const named = await post('http://svc-test.invalid/x', '{}', {}, AbortSignal.timeout(5000), { publicOnly: true, resolve: async () => ['10.0.0.7'] }).catch((e) => e);
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

    const open = await startTestServer({ SVC_ENV: 'production', SVC_OPERATIONS_ALLOW_PRIVATE: '1', SVC_OPERATIONS_POLL_MS: '50' });
    servers.push(open);
    const q = await opsProject(open, 'open');
    await q.push({ operations: [{ key: 'loop', endpoint: `${ep.url}/prod-ok` }] });
    const k2 = await q.key(['operations:execute', 'operations:read']);
    const r = await q.gql(k2, `mutation { executeOperation(key: "loop") { id } }`);
    expect((await waitStatus(q, k2, r.data.executeOperation.id)).status).toBe('completed');
  }, 30_000);
});
