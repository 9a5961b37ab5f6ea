import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import { csrfTokenOf, sessionCookie, sessionTokenOf } from '../auth/member-session-cookie.ts';
import {
  acceptInvite,
  createLoginCodes,
  loginWithCode,
  loginWithPassword,
  projectsOfLogin,
  revokeSession,
  sessionOf,
  SESSION_DAYS,
  type NewSession,
} from '../control/member-sessions.ts';
import { sendMail } from '../identity/mailer.ts';
import { tenantName } from '../control/tenancy.ts';
import {
  ASSET_PREFIX,
  buildExplorer,
  buildStudio,
  graphiqlHtml,
  Lazy,
  studioHtml,
  type StudioAsset,
} from '../studio/bundle.ts';
import { objectBody } from './control-request.ts';

/**
 * The Studio on the API listener (docs/studio.md): the app under /studio (built on first
 * request, src/studio/bundle.ts) and member sign-in under /studio/api. Everything else the app
 * does goes through the public APIs with the session cookie (the gate, auth/gate.ts).
 */
function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
  });
}

/** Sign-in posts are JSON only: a cross-site form cannot send them without a CORS preflight. */
function jsonBody(request: Request, body: unknown): Record<string, unknown> {
  const type = request.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') throw new BadUserInput('Send the body as application/json');
  return objectBody(body);
}

function serveAsset(asset: StudioAsset | undefined, request: Request): Response {
  if (!asset) throw new NotFound('No such Studio asset');
  const gzip = /\bgzip\b/.test(request.headers.get('accept-encoding') ?? '');
  return new Response(gzip ? asset.gzip : asset.body, {
    headers: {
      'content-type': asset.type,
      // Names carry a content hash: a new build has new names.
      'cache-control': 'public, max-age=31536000, immutable',
      'x-content-type-options': 'nosniff',
      vary: 'accept-encoding',
      ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    },
  });
}

export function studioRoutes(svc: Service) {
  const app = new Lazy(() => buildStudio());
  const explorer = new Lazy(() => buildExplorer());
  const { settings } = svc;
  const secure = settings.baseUrl.startsWith('https:');
  const deps = { sql: svc.sql, dataDir: settings.dataDir };
  const signedIn = (s: NewSession) =>
    json({ csrf: csrfTokenOf(s.token), tenantId: s.tenantId, expiresAt: s.expiresAt.toISOString() }, 200, {
      'set-cookie': sessionCookie(s.token, { secure, maxAgeSeconds: SESSION_DAYS * 86400 }),
    });
  // Read per page: with REALTIME_PORT=0 the gateway's address is known only once it listens.
  const csp = () =>
    [
      "default-src 'self'",
      `connect-src 'self' ${new URL(settings.realtimeUrl).origin.replace(/^http/, 'ws')} ${settings.realtimeUrl.replace(/\/+$/, '')}`,
      "img-src 'self' data: blob: https: http:",
      "media-src 'self' blob: https: http:",
      "style-src 'self' 'unsafe-inline'",
      // GraphiQL's stylesheet carries its fonts inline.
      "font-src 'self' data:",
      "script-src 'self'",
      "worker-src blob: 'self'",
      'frame-src https: http:',
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'self'",
    ].join('; ');

  const headers = () => ({
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-cache',
    'content-security-policy': csp(),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
  });
  const page = async () => {
    const b = await app.get();
    return new Response(studioHtml(b, { realtimeUrl: settings.realtimeUrl, production: settings.production }), {
      headers: headers(),
    });
  };

  const routes = new Elysia({ name: 'svc.studio' });
  // GraphiQL for API keys, in place of the former textarea page (not in production, like before).
  if (!settings.production)
    routes.get('/graphiql', async () => new Response(graphiqlHtml(await explorer.get()), { headers: headers() }));
  return routes
    .get('/studio', page)
    .get('/studio/', page)
    .get('/studio/assets/:name', async ({ params, request }) =>
      serveAsset((await app.get()).assets.get(params.name), request),
    )
    .get('/studio/explorer/manifest.json', async () =>
      json((await explorer.get()).manifest, 200, { 'cache-control': 'no-cache' }),
    )
    .get('/studio/explorer/:name', async ({ params, request }) =>
      serveAsset((await explorer.get()).assets.get(params.name), request),
    )
    .post('/studio/api/login', async ({ request, body }) =>
      signedIn(await loginWithPassword(deps, jsonBody(request, body))),
    )
    .post('/studio/api/code', async ({ request, body }) => {
      const { email, codes } = await createLoginCodes(deps, jsonBody(request, body));
      for (const c of codes) {
        await sendMail(
          { sql: svc.sql, settings },
          {
            projectId: c.tenantId,
            to: email,
            list: 'otp',
            subject: `Your svc Studio sign-in code: ${c.code}`,
            text: `Your code to sign in to ${c.tenantName} in the svc Studio is ${c.code}. It is valid for 10 minutes and can be used once.`,
          },
        );
      }
      // The same answer whether or not the address is a member's.
      return json({ sent: true });
    })
    .post('/studio/api/login-code', async ({ request, body }) =>
      signedIn(await loginWithCode(deps, jsonBody(request, body))),
    )
    .post('/studio/api/welcome', async ({ request, body }) =>
      signedIn(await acceptInvite(deps, jsonBody(request, body))),
    )
    .get('/studio/api/session', async ({ request }) => {
      const token = sessionTokenOf(request.headers.get('cookie'));
      const login = token ? await sessionOf(svc.sql, token) : null;
      // Signed out is a normal state of the page, not an error (200, so no console noise).
      if (!token || !login) return json({ signedIn: false });
      return json({
        signedIn: true,
        email: login.email,
        tenant: { id: login.tenantId, name: (await tenantName(svc.sql, login.tenantId)) ?? login.tenantId },
        csrf: csrfTokenOf(token),
        roles: login.rows.map((r) => ({ role: r.role, projectId: r.projectId })),
        projects: await projectsOfLogin(svc.sql, login),
      });
    })
    .post('/studio/api/logout', async ({ request }) => {
      // Logging out needs the CSRF token too (a cross-site page must not sign anyone out).
      const token = svc.gate.sessionToken({ headers: request.headers });
      if (token) await revokeSession(svc.sql, token);
      return json({ signedOut: true }, 200, { 'set-cookie': sessionCookie(null, { secure, maxAgeSeconds: 0 }) });
    })
    .get('/studio/*', ({ params, request }) => {
      const rest = (params as Record<string, string>)['*'] ?? '';
      if (rest.startsWith('api/') || request.url.includes(ASSET_PREFIX)) throw new NotFound('No such endpoint');
      return page();
    });
}
