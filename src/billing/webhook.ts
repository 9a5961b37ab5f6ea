import type { Sql } from '../store/db.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import { FREE_PLAN, PLANS, planOfSubscription, statusEffect } from './plans.ts';
import { SignatureError, verifySignature } from './stripe-signature.ts';

/**
 * POST /v1/webhooks/{billing_provider} (docs/billing.md). The signature is checked over the raw
 * body before anything is parsed or stored; each event is stored once by its id (a replay is
 * answered 200 and changes nothing); subscription events move the tenant's plan and limits in
 * the same transaction. An event older than the last one applied to the tenant is stored but
 * not applied (Stripe does not promise order).
 */
export interface BillingDeps {
  sql: Sql;
  stripeSecrets: readonly string[];
  /** Seconds since the epoch (tests pass their own clock). */
  now?: () => number;
}

export interface WebhookAnswer {
  received: true;
  duplicate?: true;
  /** What the event did: `applied`, or why it changed nothing. */
  outcome: 'applied' | 'linked' | 'ignored' | 'no_tenant' | 'unknown_plan' | 'out_of_order' | 'duplicate';
  tenantId?: string;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : null);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const MAX_EVENT_BYTES = 1024 * 1024;
const EVENT_ID_RE = /^[A-Za-z0-9_-]{1,255}$/;

export async function receiveBillingWebhook(
  deps: BillingDeps,
  provider: string,
  raw: Uint8Array,
  signature: string | null,
): Promise<WebhookAnswer> {
  if (provider !== 'stripe')
    throw new NotFound(`unknown billing provider "${provider.slice(0, 40)}"; this service receives: stripe`);
  if (deps.stripeSecrets.length === 0)
    throw new NotFound('the stripe billing webhook is not configured (SVC_BILLING_STRIPE_SECRET)');
  if (raw.byteLength > MAX_EVENT_BYTES) throw new BadUserInput('the event is larger than 1 MB');
  try {
    verifySignature(raw, signature, deps.stripeSecrets, (deps.now ?? (() => Date.now() / 1000))());
  } catch (err) {
    if (err instanceof SignatureError)
      throw new BadUserInput(`invalid Stripe-Signature: ${err.message}`, { reason: err.problem });
    throw err;
  }
  let event: Obj | null;
  try {
    event = obj(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw)));
  } catch {
    throw new BadUserInput('the body is not a JSON object');
  }
  const id = str(event?.id);
  const type = str(event?.type);
  const created = typeof event?.created === 'number' && Number.isFinite(event.created) ? event.created : null;
  const object = obj(obj(event?.data)?.object);
  if (!event || !id || !EVENT_ID_RE.test(id) || !type || type.length > 200 || created === null || !object) {
    throw new BadUserInput('the body is not a Stripe event: it needs id, type, created and data.object');
  }
  return deps.sql.begin(async (txRaw) => {
    const tx = txRaw as unknown as Sql;
    const [fresh] = await tx<{ id: string }[]>`
      insert into billing_events (provider, id, type, created, payload)
      values ('stripe', ${id}, ${type}, to_timestamp(${created}), ${tx.json(event as never)})
      on conflict (provider, id) do nothing returning id`;
    if (!fresh) return { received: true, duplicate: true, outcome: 'duplicate' } as WebhookAnswer;
    const answer = await apply(tx, type, created, object);
    if (answer.tenantId)
      await tx`update billing_events set tenant_id = ${answer.tenantId} where provider = 'stripe' and id = ${id}`;
    return answer;
  }) as Promise<WebhookAnswer>;
}

async function tenantExists(tx: Sql, id: string | null): Promise<string | null> {
  if (!id) return null;
  const [row] = await tx<{ id: string }[]>`select id from tenants where id = ${id}`;
  return row?.id ?? null;
}

/** Links a provider customer to a tenant unless another tenant already holds it. */
async function link(tx: Sql, tenantId: string, customer: string | null, subscription: string | null): Promise<void> {
  if (customer) {
    await tx`update tenants set billing_customer_id = ${customer}
             where id = ${tenantId} and not exists (select 1 from tenants t where t.billing_customer_id = ${customer} and t.id <> ${tenantId})`;
  }
  if (subscription) await tx`update tenants set billing_subscription_id = ${subscription} where id = ${tenantId}`;
}

async function apply(tx: Sql, type: string, created: number, o: Obj): Promise<WebhookAnswer> {
  if (type === 'checkout.session.completed') {
    const tenantId = await tenantExists(tx, str(o.client_reference_id));
    if (!tenantId) return { received: true, outcome: 'no_tenant' };
    await link(tx, tenantId, str(o.customer), str(o.subscription));
    return { received: true, outcome: 'linked', tenantId };
  }
  if (!type.startsWith('customer.subscription.')) return { received: true, outcome: 'ignored' };
  const customer = str(o.customer);
  let tenantId = await tenantExists(tx, str(obj(o.metadata)?.svc_tenant_id));
  if (tenantId) await link(tx, tenantId, customer, str(o.id));
  else if (customer) {
    const [row] = await tx<{ id: string }[]>`select id from tenants where billing_customer_id = ${customer}`;
    tenantId = row?.id ?? null;
  }
  if (!tenantId) return { received: true, outcome: 'no_tenant' };
  const status = type === 'customer.subscription.deleted' ? 'canceled' : (str(o.status) ?? 'active');
  const effect = statusEffect(status);
  const { plan } = planOfSubscription(o);
  if (effect === 'grant' && !plan) return { received: true, outcome: 'unknown_plan', tenantId };
  const periodEnd = typeof o.current_period_end === 'number' ? o.current_period_end : null;
  const next = effect === 'grant' ? plan! : effect === 'revoke' ? FREE_PLAN : null;
  const [moved] = await tx<{ id: string }[]>`
    update tenants set
      plan_status = ${status},
      plan = coalesce(${next}::text, plan),
      plan_limits = case when ${next}::text is null then plan_limits else ${tx.json((next ? PLANS[next] : {}) as never)} end,
      plan_period_end = case when ${periodEnd}::float8 is null then plan_period_end else to_timestamp(${periodEnd}::float8) end,
      billing_subscription_id = coalesce(${str(o.id)}::text, billing_subscription_id),
      plan_event_at = to_timestamp(${created})
    where id = ${tenantId} and (plan_event_at is null or plan_event_at <= to_timestamp(${created}))
    returning id`;
  return { received: true, outcome: moved ? 'applied' : 'out_of_order', tenantId };
}

export interface TenantBilling {
  tenantId: string;
  plan: string;
  status: string;
  limits: Record<string, number | null>;
  periodEnd: string | null;
  customerId: string | null;
  subscriptionId: string | null;
}

/** A tenant's plan as the control plane shows it (limits default to the plan's table entry). */
export async function tenantBilling(sql: Sql, tenantId: string): Promise<TenantBilling> {
  const [row] = await sql<
    {
      id: string;
      plan: string;
      plan_status: string;
      plan_limits: Record<string, number | null>;
      plan_period_end: Date | null;
      billing_customer_id: string | null;
      billing_subscription_id: string | null;
    }[]
  >`
    select id, plan, plan_status, plan_limits, plan_period_end, billing_customer_id, billing_subscription_id from tenants where id = ${tenantId}`;
  if (!row) throw new NotFound('Tenant not found');
  const limits = Object.keys(row.plan_limits ?? {}).length
    ? row.plan_limits
    : { ...(PLANS[row.plan] ?? PLANS[FREE_PLAN]!) };
  return {
    tenantId: row.id,
    plan: row.plan,
    status: row.plan_status,
    limits,
    periodEnd: row.plan_period_end?.toISOString() ?? null,
    customerId: row.billing_customer_id,
    subscriptionId: row.billing_subscription_id,
  };
}
