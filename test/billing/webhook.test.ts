import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import Stripe from 'stripe';
import { bootstrapProject, startTestServer, type TestServer } from '../support/server.ts';
import { spawnBeside } from '../support/process.ts';
import { verifySignature } from '../../src/billing/stripe-signature.ts';

/**
 * The billing webhook (issue 19) against Stripe's own signing: headers are built with the
 * `stripe` package's generateTestHeaderString, exactly as Stripe signs deliveries. Under Bun the
 * package loads its worker build, whose only crypto is SubtleCrypto, so it asks for the async
 * form of the same function (`generateTestHeaderStringAsync`).
 */
const SECRET = 'whsec_test_surfaces_0123456789abcdef';
const stripe = new Stripe('sk_test_not_used');
let server: TestServer;
let other: string;
let proc: Subprocess | undefined;

beforeAll(async () => {
  server = await startTestServer({ SVC_BILLING_STRIPE_SECRET: SECRET });
  ({ proc, url: other } = await spawnBeside(server, { SVC_BILLING_STRIPE_SECRET: SECRET }));
}, 60_000);

afterAll(async () => {
  proc?.kill('SIGKILL');
  await server.stop();
});

let seq = 0;
function subscriptionEvent(
  type: string,
  sub: Record<string, unknown>,
  created = Math.floor(Date.now() / 1000),
): Record<string, unknown> {
  return {
    id: `evt_test_${Date.now()}_${++seq}`,
    object: 'event',
    type,
    created,
    api_version: '2024-06-20',
    data: { object: { object: 'subscription', ...sub } },
  };
}

function priced(lookupKey: string) {
  return { items: { object: 'list', data: [{ price: { id: 'price_1', lookup_key: lookupKey, metadata: {} } }] } };
}

async function deliver(
  apiUrl: string,
  event: unknown,
  opts: { secret?: string; timestamp?: number; header?: string | null; provider?: string } = {},
): Promise<{ status: number; body: any }> {
  const payload = JSON.stringify(event);
  const header =
    opts.header !== undefined
      ? opts.header
      : await stripe.webhooks.generateTestHeaderStringAsync({
          payload,
          secret: opts.secret ?? SECRET,
          timestamp: opts.timestamp,
        });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (header !== null) headers['stripe-signature'] = header;
  const res = await fetch(`${apiUrl}/v1/webhooks/${opts.provider ?? 'stripe'}`, {
    method: 'POST',
    headers,
    body: payload,
  });
  return { status: res.status, body: await res.json() };
}

async function billing(apiUrl: string, ownerKey: string): Promise<any> {
  const res = await fetch(`${apiUrl}/v1/control/billing`, { headers: { authorization: `Bearer ${ownerKey}` } });
  expect(res.status).toBe(200);
  return res.json();
}

async function eventCount(): Promise<number> {
  const [r] = await server.svc.sql`select count(*)::int as n from billing_events`;
  return r!.n;
}

describe('Stripe signature scheme', () => {
  test('accepts what the stripe library signs; refuses another secret, an edited body and a stale time', async () => {
    const payload = JSON.stringify({ id: 'evt_1', type: 'ping' });
    const now = Math.floor(Date.now() / 1000);
    const header = await stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: SECRET, timestamp: now });
    // And Stripe's own verifier accepts what ours accepts.
    expect(((await stripe.webhooks.constructEventAsync(payload, header, SECRET)) as any).id).toBe('evt_1');
    expect(verifySignature(payload, header, [SECRET], now).t).toBe(now);
    expect(verifySignature(payload, header, ['whsec_old', SECRET], now + 299).t).toBe(now);
    const problem = (f: () => unknown) => {
      try {
        f();
        return 'passed';
      } catch (e) {
        return (e as { problem: string }).problem;
      }
    };
    expect(problem(() => verifySignature(payload, header, ['whsec_other'], now))).toBe('mismatch');
    expect(problem(() => verifySignature(payload + ' ', header, [SECRET], now))).toBe('mismatch');
    expect(problem(() => verifySignature(payload, header, [SECRET], now + 301))).toBe('stale');
    expect(problem(() => verifySignature(payload, '', [SECRET], now))).toBe('missing');
    expect(problem(() => verifySignature(payload, `t=${now}`, [SECRET], now))).toBe('no_v1');
    expect(problem(() => verifySignature(payload, 'v1=abc', [SECRET], now))).toBe('malformed');
  });
});

describe('POST /v1/webhooks/stripe', () => {
  test('a subscription moves the tenant onto its plan; a replay to the other process is answered 200 and ignored', async () => {
    const t = await bootstrapProject(server, 'billing');
    expect((await billing(server.apiUrl, t.ownerKey)).plan).toBe('free');
    const created = subscriptionEvent('customer.subscription.created', {
      id: 'sub_1',
      customer: 'cus_A',
      status: 'active',
      metadata: { svc_tenant_id: t.tenantId },
      current_period_end: 1_900_000_000,
      ...priced('pro'),
    });
    const first = await deliver(server.apiUrl, created);
    expect(first).toEqual({ status: 200, body: { received: true, outcome: 'applied', tenantId: t.tenantId } });
    const plan = await billing(other, t.ownerKey);
    expect(plan).toMatchObject({
      tenantId: t.tenantId,
      plan: 'pro',
      status: 'active',
      customerId: 'cus_A',
      subscriptionId: 'sub_1',
      periodEnd: '2030-03-17T17:46:40.000Z',
    });
    expect(plan.limits).toEqual({ projects: 50, members: 50, apiRequestsPerHour: 250_000, storageMb: 102_400 });

    // Stripe re-delivers the same event (same id) to the other process: stored once, no effect.
    const before = await eventCount();
    const replay = await deliver(other, created);
    expect(replay).toEqual({ status: 200, body: { received: true, duplicate: true, outcome: 'duplicate' } });
    expect(await eventCount()).toBe(before);

    // Later events find the tenant by its Stripe customer; an older one arriving late changes nothing.
    const now = Math.floor(Date.now() / 1000);
    const upgraded = await deliver(
      other,
      subscriptionEvent(
        'customer.subscription.updated',
        { id: 'sub_1', customer: 'cus_A', status: 'active', ...priced('enterprise') },
        now + 10,
      ),
    );
    expect(upgraded.body.outcome).toBe('applied');
    const late = await deliver(
      server.apiUrl,
      subscriptionEvent(
        'customer.subscription.updated',
        { id: 'sub_1', customer: 'cus_A', status: 'active', ...priced('starter') },
        now - 100,
      ),
    );
    expect(late.body.outcome).toBe('out_of_order');
    expect((await billing(server.apiUrl, t.ownerKey)).plan).toBe('enterprise');
    expect((await billing(server.apiUrl, t.ownerKey)).limits.projects).toBeNull();

    const pastDue = await deliver(
      server.apiUrl,
      subscriptionEvent(
        'customer.subscription.updated',
        { id: 'sub_1', customer: 'cus_A', status: 'past_due', ...priced('enterprise') },
        now + 20,
      ),
    );
    expect(pastDue.body.outcome).toBe('applied');
    expect(await billing(server.apiUrl, t.ownerKey)).toMatchObject({ plan: 'enterprise', status: 'past_due' });
    await deliver(
      server.apiUrl,
      subscriptionEvent(
        'customer.subscription.deleted',
        { id: 'sub_1', customer: 'cus_A', status: 'canceled', ...priced('enterprise') },
        now + 30,
      ),
    );
    expect(await billing(other, t.ownerKey)).toMatchObject({
      plan: 'free',
      status: 'canceled',
      limits: { projects: 3 },
    });
  }, 30_000);

  test('checkout links a customer to the tenant named by client_reference_id; unknown plans and customers change nothing', async () => {
    const t = await bootstrapProject(server, 'checkout');
    const linked = await deliver(server.apiUrl, {
      id: `evt_co_${Date.now()}`,
      type: 'checkout.session.completed',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: {
          object: 'checkout.session',
          client_reference_id: t.tenantId,
          customer: 'cus_B',
          subscription: 'sub_B',
        },
      },
    });
    expect(linked.body).toEqual({ received: true, outcome: 'linked', tenantId: t.tenantId });
    const odd = await deliver(
      server.apiUrl,
      subscriptionEvent('customer.subscription.updated', {
        id: 'sub_B',
        customer: 'cus_B',
        status: 'active',
        ...priced('platinum'),
      }),
    );
    expect(odd.body.outcome).toBe('unknown_plan');
    const stranger = await deliver(
      server.apiUrl,
      subscriptionEvent('customer.subscription.updated', {
        id: 'sub_Z',
        customer: 'cus_nobody',
        status: 'active',
        ...priced('pro'),
      }),
    );
    expect(stranger.body.outcome).toBe('no_tenant');
    const ignored = await deliver(server.apiUrl, {
      id: `evt_inv_${Date.now()}`,
      type: 'invoice.paid',
      created: 1,
      data: { object: { object: 'invoice' } },
    });
    expect(ignored.body.outcome).toBe('ignored');
    expect(await billing(server.apiUrl, t.ownerKey)).toMatchObject({
      plan: 'free',
      customerId: 'cus_B',
      subscriptionId: 'sub_B',
    });
  });

  test('unsigned, wrongly signed, stale, malformed and unknown-provider deliveries are 4xx with nothing stored', async () => {
    const t = await bootstrapProject(server, 'refused');
    const event = subscriptionEvent('customer.subscription.created', {
      id: 'sub_X',
      customer: 'cus_X',
      status: 'active',
      metadata: { svc_tenant_id: t.tenantId },
      ...priced('pro'),
    });
    const before = await eventCount();
    const cases: [string, Promise<{ status: number; body: any }>][] = [
      ['unsigned', deliver(server.apiUrl, event, { header: null })],
      ['wrong secret', deliver(server.apiUrl, event, { secret: 'whsec_attacker' })],
      ['stale', deliver(server.apiUrl, event, { timestamp: Math.floor(Date.now() / 1000) - 301 })],
      ['future', deliver(server.apiUrl, event, { timestamp: Math.floor(Date.now() / 1000) + 3600 })],
      ['garbage header', deliver(server.apiUrl, event, { header: 't=abc,v1=zz' })],
    ];
    for (const [name, p] of cases) {
      const r = await p;
      expect(`${name}: ${r.status} ${r.body.error}`).toBe(`${name}: 400 BAD_USER_INPUT`);
      expect(r.body.message).toStartWith('invalid Stripe-Signature');
    }
    // Signed but not an event.
    const notEvent = await deliver(server.apiUrl, { hello: 'world' });
    expect([notEvent.status, notEvent.body.error]).toEqual([400, 'BAD_USER_INPUT']);
    const unknown = await deliver(server.apiUrl, event, { provider: 'paddle' });
    expect([unknown.status, unknown.body.error]).toEqual([404, 'NOT_FOUND']);
    expect(await eventCount()).toBe(before);
    expect((await billing(server.apiUrl, t.ownerKey)).plan).toBe('free');
  });

  test('without a configured secret the receiver answers 404 and stores nothing', async () => {
    const bare = await startTestServer({ DATABASE_URL: server.databaseUrl });
    try {
      const r = await deliver(
        bare.apiUrl,
        subscriptionEvent('customer.subscription.created', { id: 'sub_Q', customer: 'cus_Q', status: 'active' }),
      );
      expect([r.status, r.body.error]).toEqual([404, 'NOT_FOUND']);
    } finally {
      await bare.stop();
    }
  });
});
