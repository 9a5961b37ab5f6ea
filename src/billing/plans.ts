/**
 * Plans a tenant can be on, and how a billing provider's subscription maps onto one
 * (docs/billing.md). Limits are what the plan allows; `null` means unlimited.
 */
export interface PlanLimits {
  projects: number | null;
  members: number | null;
  apiRequestsPerHour: number | null;
  storageMb: number | null;
}

export const PLANS: Readonly<Record<string, PlanLimits>> = {
  free: { projects: 3, members: 3, apiRequestsPerHour: 10_000, storageMb: 1_024 },
  starter: { projects: 10, members: 10, apiRequestsPerHour: 50_000, storageMb: 10_240 },
  pro: { projects: 50, members: 50, apiRequestsPerHour: 250_000, storageMb: 102_400 },
  enterprise: { projects: null, members: null, apiRequestsPerHour: null, storageMb: null },
};

export const FREE_PLAN = 'free';

/** What a subscription status does to the plan it names. */
export type StatusEffect = 'grant' | 'revoke' | 'hold';

/**
 * Stripe subscription statuses: `active`, `trialing` and `past_due` (Stripe is still retrying
 * the payment) grant the plan; `canceled`, `unpaid`, `incomplete_expired` and `paused` put the
 * tenant back on `free`; `incomplete` (first payment pending) changes nothing but the status.
 */
export function statusEffect(status: string): StatusEffect {
  if (status === 'active' || status === 'trialing' || status === 'past_due') return 'grant';
  if (status === 'incomplete') return 'hold';
  return 'revoke';
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : null);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/**
 * The plan a Stripe subscription names, looked up in this order: the first item's price
 * `lookup_key`, that price's `metadata.svc_plan`, the subscription's `metadata.svc_plan`.
 * Null when none names a known plan.
 */
export function planOfSubscription(sub: Obj): { plan: string | null; named: string | null } {
  const items = obj(sub.items)?.data;
  const price = Array.isArray(items) ? obj(obj(items[0])?.price) : null;
  const named = str(price?.lookup_key) ?? str(obj(price?.metadata)?.svc_plan) ?? str(obj(sub.metadata)?.svc_plan);
  const plan = named ? named.toLowerCase() : null;
  return { plan: plan && Object.hasOwn(PLANS, plan) ? plan : null, named };
}
