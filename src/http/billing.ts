import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { controlCaller } from './control-request.ts';
import { receiveBillingWebhook, tenantBilling } from '../billing/webhook.ts';
import { BadUserInput } from '../errors.ts';

/**
 * Billing (docs/billing.md): the provider webhook receiver, signed, never authenticated by an
 * API key; and GET /v1/control/billing, the caller's tenant plan (the root token names one
 * with `?tenant=`).
 */
export function billingRoutes(svc: Service) {
  const deps = { sql: svc.sql, stripeSecrets: svc.settings.billingStripeSecrets };
  return new Elysia({ name: 'svc.billing' })
    .post(
      '/v1/webhooks/:provider',
      async ({ params, request }) => {
        const raw = new Uint8Array(await request.arrayBuffer());
        const answer = await receiveBillingWebhook(deps, params.provider, raw, request.headers.get('stripe-signature'));
        return new Response(JSON.stringify(answer), {
          status: 200,
          headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
        });
      },
      { parse: 'none' },
    )
    .get('/v1/control/billing', async ({ headers, query }) => {
      const caller = await controlCaller(svc, headers);
      let tenantId: string;
      if (caller.kind === 'root') {
        if (typeof query.tenant !== 'string' || query.tenant === '')
          throw new BadUserInput('the root token names the tenant: ?tenant=<tenant id>');
        tenantId = query.tenant;
      } else tenantId = caller.tenantId;
      return tenantBilling(svc.sql, tenantId);
    });
}
