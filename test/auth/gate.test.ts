import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { insertApiKey, type NewKeyInput } from '../../src/auth/api-keys.ts';
import { RateLimited, SvcError, Unauthenticated } from '../../src/errors.ts';
import { Gate } from '../../src/auth/gate.ts';
import type { CustomerPrincipal } from '../../src/auth/principal.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { setup, type Setup } from './support.ts';

/**
 * The gate is what the gateway's upgrades (graphql-ws, /sse, /_events, rooms) call with the
 * upgrade request's headers and URL parameters; HTTP surfaces are covered by the whoami and
 * GraphQL tests. These drive it as those callers will, on real keys in PostgreSQL.
 */
let server: TestServer;
let s: Setup;
let other: Setup;

beforeAll(async () => {
  server = await startTestServer();
  s = await setup(server, 'gate');
  other = await setup(server, 'gate2');
});
afterAll(() => server.stop());

/** A records:read key named g of `kind` on the project `s`, written straight to the table; `extra` overrides. */
const gateKey = (kind: NewKeyInput['kind'], extra: Partial<NewKeyInput> = {}) =>
  insertApiKey(server.svc.sql, {
    tenantId: s.tenantId,
    projectId: s.projectId,
    kind,
    name: 'g',
    scopes: ['records:read'],
    ...extra,
  });

const refusal = async (p: Promise<unknown>): Promise<SvcError> => {
  try {
    await p;
  } catch (err) {
    return err as SvcError;
  }
  throw new Error('expected a refusal');
};

describe('gate: query parameters of an upgrade', () => {
  test('apiKey= authenticates like x-api-key, and the header wins over the parameter', async () => {
    const { key, id } = await gateKey('pk');
    const caller = await server.svc.gate.authenticate({
      headers: new Headers({ origin: 'https://app.example' }),
      params: new URLSearchParams({ apiKey: key }),
    });
    expect(caller.key.keyId).toBe(id);
    expect(caller.key.projectId).toBe(s.projectId);
    const wrong = await refusal(
      server.svc.gate.authenticate({ headers: { 'x-api-key': 'pk_nope' }, params: { apiKey: key } }),
    );
    expect(wrong).toBeInstanceOf(Unauthenticated);
    expect(wrong.message).toBe('Authentication required');
  });

  test('a secret key in a browser upgrade (Origin present) is refused as over HTTP', async () => {
    const { key } = await gateKey('sk');
    const err = await refusal(
      server.svc.gate.authenticate({ headers: { origin: 'https://app.example' }, params: { apiKey: key } }),
    );
    expect(err.code).toBe('PERMISSION_DENIED');
    expect(err.message).toBe('Insufficient permissions');
  });

  test('projectId= picks the project of a tenant key; a project off its list is refused', async () => {
    const { key } = await gateKey('pk_t', { projectId: null, projectIds: [s.projectId] });
    const caller = await server.svc.gate.authenticate({
      headers: {},
      params: new URLSearchParams({ apiKey: key, projectId: s.projectId }),
    });
    expect(caller.key.projectId).toBe(s.projectId);
    const off = await refusal(
      server.svc.gate.authenticate({ headers: {}, params: { apiKey: key, projectId: other.projectId } }),
    );
    expect(off.code).toBe('PERMISSION_DENIED');
    const none = await refusal(server.svc.gate.authenticate({ headers: {}, params: { apiKey: key } }));
    expect(none.code).toBe('BAD_USER_INPUT');
  });
});

describe('gate: customer tokens and the rate limit', () => {
  test('token= and Authorization: Bearer reach the customer resolver with the key; a bad token is refused', async () => {
    const { key } = await gateKey('pk');
    const gate = new Gate({ keys: server.svc.gate.keys, limiter: server.svc.gate.limiter });
    // A gate without identity refuses a token instead of serving the request as the bare key.
    expect((await refusal(gate.authenticate({ headers: {}, params: { apiKey: key, token: 'ct_abc' } }))).code).toBe(
      'UNAUTHENTICATED',
    );
    const seen: string[] = [];
    gate.useCustomers((token, k) => {
      seen.push(`${token}@${k.projectId}`);
      if (token !== 'ct_abc') throw new Unauthenticated('Invalid or expired token');
      const c: CustomerPrincipal = {
        customerId: 'c1',
        email: null,
        scopes: new Set(),
        projectId: k.projectId,
        sessionId: 's1',
        expiresAt: Date.now() + 60_000,
      };
      return c;
    });
    const viaHeader = await gate.authenticate({ headers: { 'x-api-key': key, authorization: 'Bearer ct_abc' } });
    expect(viaHeader.customer?.customerId).toBe('c1');
    const viaParam = await gate.authenticate({
      headers: {},
      params: new URLSearchParams({ apiKey: key, token: 'ct_abc' }),
    });
    expect(viaParam.customer?.customerId).toBe('c1');
    const bad = await refusal(gate.authenticate({ headers: { 'x-api-key': key }, params: { token: 'ct_bad' } }));
    expect(bad.message).toBe('Invalid or expired token');
    const notBearer = await refusal(gate.authenticate({ headers: { 'x-api-key': key, authorization: 'Basic eDp5' } }));
    expect(notBearer.code).toBe('UNAUTHENTICATED');
    expect(seen).toEqual([
      `ct_abc@${s.projectId}`,
      `ct_abc@${s.projectId}`,
      `ct_bad@${s.projectId}`,
      `@${s.projectId}`,
    ]);
    expect((await gate.authenticate({ headers: { 'x-api-key': key } })).customer).toBeNull();
  });

  test('admit counts the request and returns the rate-limit headers; a refusal carries them with Retry-After', async () => {
    const { key } = await gateKey('pk', { rateLimit: 2 });
    const before = server.svc.gate.refusals;
    const first = await server.svc.gate.admit({ headers: {}, params: { apiKey: key } });
    expect(first.headers['x-ratelimit-limit']).toBe('2');
    expect(first.headers['x-ratelimit-remaining']).toBe('1');
    await server.svc.gate.admit({ headers: { 'x-api-key': key } });
    const err = await refusal(server.svc.gate.admit({ headers: { 'x-api-key': key } }));
    expect(err).toBeInstanceOf(RateLimited);
    expect(err.headers?.['x-ratelimit-remaining']).toBe('0');
    expect(Number(err.headers?.['retry-after'])).toBeGreaterThan(0);
    expect(server.svc.gate.refusals).toBe(before + 1);
  });
});
