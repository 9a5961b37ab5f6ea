import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { controlCaller, objectBody } from './control-request.ts';
import { BadUserInput, PermissionDenied } from '../errors.ts';
import { tokenService } from '../identity/tokens.ts';
import {
  DEFAULT_PUBLISH_SECONDS,
  JWKS_MAX_AGE,
  MAX_TOKEN_SECONDS,
  rotateSigningKey,
} from '../identity/token-signing-keys.ts';
import { secretsKey } from '../secrets-key.ts';
import { readUnsubscribeToken, recordUnsubscribe } from '../identity/mailer.ts';

const BAD_LINK = { error: 'BAD_USER_INPUT', message: 'This unsubscribe link is not valid' };

function page(title: string, body: string, status = 200): Response {
  const html =
    `<!doctype html><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title>` +
    `<body style="font-family:system-ui;max-width:32rem;margin:4rem auto">${body}</body>`;
  return new Response(html, {
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' },
  });
}

/**
 * Customer identity endpoints: the public key set (spec "Endpoints", CONTRACT §8), the
 * operator's key rotation (`svc signing-keys rotate`, root token: the keys are the deployment's)
 * and mail unsubscribes (RFC 8058). `POST /v1/email/unsubscribe?token=…` is the one-click
 * unsubscribe mail clients send (body `List-Unsubscribe=One-Click`) and records the opt-out;
 * `GET` checks the token and shows a page whose button posts it — a GET never unsubscribes,
 * because link scanners and prefetchers follow every link in a mail.
 */
export function identityRoutes(svc: Service) {
  const tokens = tokenService(svc);
  return new Elysia({ name: 'svc.identity' })
    .get(
      '/.well-known/jwks.json',
      () =>
        new Response(JSON.stringify(tokens.keys.jwks()), {
          headers: { 'content-type': 'application/jwk-set+json', 'cache-control': `public, max-age=${JWKS_MAX_AGE}` },
        }),
    )
    .get('/v1/email/unsubscribe', ({ query }) => {
      const t = readUnsubscribeToken(svc.settings.dataDir, query.token);
      if (!t)
        return new Response(JSON.stringify(BAD_LINK), { status: 400, headers: { 'content-type': 'application/json' } });
      const action = `/v1/email/unsubscribe?token=${encodeURIComponent(String(query.token))}`;
      return page(
        'Unsubscribe',
        `<p>Stop sending <b>${t.list}</b> mail to ${t.email.replace(/[<>&"]/g, '')}?</p>` +
          `<form method="post" action="${action}"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button>Unsubscribe</button></form>`,
      );
    })
    .post('/v1/email/unsubscribe', async ({ query, body }) => {
      const fromBody = typeof body === 'object' && body !== null ? (body as Record<string, unknown>).token : undefined;
      const t = readUnsubscribeToken(svc.settings.dataDir, query.token ?? fromBody);
      if (!t)
        return new Response(JSON.stringify(BAD_LINK), { status: 400, headers: { 'content-type': 'application/json' } });
      await recordUnsubscribe(svc.sql, t);
      return { unsubscribed: true, list: t.list };
    })
    .post('/v1/control/signing-keys/rotate', async ({ headers, body, set }) => {
      const caller = await controlCaller(svc, headers);
      if (caller.kind !== 'root') throw new PermissionDenied('Rotating the signing keys needs the root token');
      const b = objectBody(body);
      const publish = b.publishSeconds === undefined ? DEFAULT_PUBLISH_SECONDS : b.publishSeconds;
      if (typeof publish !== 'number' || !Number.isInteger(publish) || publish < 0 || publish > MAX_TOKEN_SECONDS) {
        throw new BadUserInput(`publishSeconds must be a whole number from 0 to ${MAX_TOKEN_SECONDS}`);
      }
      const out = await rotateSigningKey(svc.sql, secretsKey(svc.settings.dataDir), publish);
      await tokens.keys.reload();
      await svc.bus.publish({ type: 'signing-keys.changed' });
      set.status = 201;
      return out;
    });
}
