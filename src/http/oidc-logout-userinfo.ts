import { decodeJwt } from 'jose';
import type { Service } from '../service.ts';
import { identityOf } from '../identity/identity.ts';
import { revokeSession } from '../identity/customer-sessions.ts';
import { bearerToken } from '../identity/tokens.ts';
import { redirectWith, scopedClaims, wireClientId, type Site } from '../identity/oidc/protocol.ts';
import { findParty, originListed } from '../identity/oidc/parties.ts';
import { endBrowserSession, sessionCookie } from '../identity/oidc/browser.ts';
import { postLogoutAllowed, readIdTokenHint } from '../identity/oidc/logout.ts';
import { userinfoOf } from '../identity/oidc/codes.ts';
import { renderErrorPage, renderInfoPage } from '../identity/oidc/page.ts';
import {
  cookieOf,
  cookiesWithPrefix,
  html,
  JSON_HEADERS,
  redirect,
  type HostedLogin,
  type RouteFn,
} from './oidc-site.ts';

const SESSION_PREFIX = 'svc_session_';

/**
 * The end of a hosted-login session and what a party may read about it: `{auth_url}/logout`
 * (OpenID RP-Initiated Logout: with a valid `id_token_hint` it signs out at once, otherwise it
 * asks on a CSRF-protected page; it revokes the browser session, clears its cookie, ends the
 * hinted session's tokens and returns to a registered `post_logout_redirect_uri`) and the
 * userinfo endpoint (OpenID Core §5.3, the claims the session's scopes release).
 */
export function oidcSessionRoutes(svc: Service, hl: HostedLogin, route: RouteFn): void {
  const auth = hl.authPath;

  const endSession = async (
    site: Site,
    { request, query, body }: { request: Request; query: Record<string, unknown>; body: unknown },
  ): Promise<Response> => {
    const post = request.method === 'POST';
    const p = post ? (typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {}) : query;
    for (const [k, v] of Object.entries(p))
      if (Array.isArray(v)) return html(renderErrorPage(`${k} was sent more than once.`), 400);
    const id = identityOf(svc.bus);
    const hint = await readIdTokenHint(id.tokens, p.id_token_hint, site.issuer);
    if (p.id_token_hint !== undefined && !hint)
      return html(renderErrorPage('The id_token_hint is not a valid ID token of this provider.'), 400);
    const named = typeof p.client_id === 'string' ? p.client_id : null;
    if (hint && named && named !== wireClientId(hint.projectId, hint.clientId))
      return html(renderErrorPage('client_id does not match the id_token_hint.'), 400);
    const wire =
      named ??
      (hint
        ? wireClientId(hint.projectId, hint.clientId)
        : site.domain
          ? wireClientId(site.domain.projectId, site.domain.clientId)
          : null);
    const party = wire ? await findParty(svc.sql, wire) : null;
    if (wire && (!party || (site.domain && party.projectId !== site.domain.projectId)))
      return html(renderErrorPage('This application is not known (unknown client_id).'), 400);
    const back = p.post_logout_redirect_uri;
    if (back !== undefined && (!party || !postLogoutAllowed(party, back))) {
      return html(renderErrorPage('The post_logout_redirect_uri is not registered for this application.'), 400);
    }
    const state = typeof p.state === 'string' && p.state.length <= 2048 ? p.state : null;
    if (!hint && !(post && hl.csrfValid(request, p.csrf))) {
      if (post)
        return html(
          renderErrorPage(
            'The form expired or was sent from another site. Go back to the application and start again.',
          ),
          403,
        );
      const csrf = hl.csrfOf(request, site);
      const fields: Record<string, string> = { csrf: csrf.token };
      if (wire) fields.client_id = wire;
      if (typeof back === 'string') fields.post_logout_redirect_uri = back;
      if (state) fields.state = state;
      const action = `${new URL(site.authBase).pathname.replace(/\/$/, '')}/logout`;
      return html(
        renderInfoPage(
          'Sign out?',
          party ? `Sign out of ${party.name} in this browser?` : 'Sign out in this browser?',
          { action, fields, button: 'Sign out' },
        ),
        200,
        csrf.setCookie ? [csrf.setCookie] : [],
      );
    }
    // The browser sessions to end: the party's project, or every one this browser holds here.
    const held = party
      ? [[`${SESSION_PREFIX}${party.projectId}`, cookieOf(request, `${SESSION_PREFIX}${party.projectId}`)] as const]
      : cookiesWithPrefix(request, SESSION_PREFIX);
    const cookies: string[] = [];
    for (const [name, token] of held) {
      const projectId = name.slice(SESSION_PREFIX.length);
      await endBrowserSession(svc.sql, token, projectId);
      cookies.push(sessionCookie(projectId, null, { path: site.cookiePath, secure: hl.secure(site) }));
    }
    if (hint?.sessionId) await revokeSession(svc.sql, id.tokens, hint.projectId, hint.sessionId, 'logout');
    if (typeof back === 'string') return redirect(redirectWith(back, { state }), cookies);
    return html(renderInfoPage('You are signed out', 'You can close this page.'), 200, cookies);
  };
  route('get', [`${auth}/logout`, '/logout'], endSession);
  route('post', [`${auth}/logout`, '/logout'], endSession);

  const userinfo = async (site: Site, { request }: { request: Request }): Promise<Response> => {
    const fail = (status: number, error: string | null, description: string) =>
      new Response(error ? JSON.stringify({ error, error_description: description }) : null, {
        status,
        headers: {
          ...JSON_HEADERS,
          'www-authenticate': error ? `Bearer error="${error}", error_description="${description}"` : 'Bearer',
        },
      });
    const token = bearerToken(request.headers.get('authorization'));
    if (!token) return fail(401, null, '');
    let projectId: unknown;
    try {
      projectId = decodeJwt(token).aud;
    } catch {
      return fail(401, 'invalid_token', 'the access token is invalid or expired');
    }
    if (typeof projectId !== 'string') return fail(401, 'invalid_token', 'the access token is invalid or expired');
    const id = identityOf(svc.bus);
    let who: Awaited<ReturnType<typeof id.tokens.verify>>;
    try {
      who = await id.tokens.verify(token, projectId);
    } catch {
      return fail(401, 'invalid_token', 'the access token is invalid or expired');
    }
    const s = await userinfoOf(svc.sql, projectId, who.sessionId);
    if (!s || !s.oidc_scopes?.includes('openid') || s.oidc_issuer !== site.issuer)
      return fail(403, 'insufficient_scope', 'the token was not issued with the openid scope by this provider');
    const claims = {
      sub: who.customerId,
      ...scopedClaims(s.oidc_scopes, { email: s.email, name: s.name, emailVerified: s.email_verified_at !== null }),
    };
    // A browser app may read it from the origins its party lists.
    const origin = request.headers.get('origin');
    const cors: Record<string, string> =
      origin && s.allowed_origins?.includes(origin) ? { 'access-control-allow-origin': origin } : {};
    return new Response(JSON.stringify(claims), { headers: { ...JSON_HEADERS, vary: 'Origin', ...cors } });
  };
  route('get', ['/customer/oauth/userinfo', '/oauth/userinfo'], userinfo);
  route('post', ['/customer/oauth/userinfo', '/oauth/userinfo'], userinfo);
  route('options', ['/customer/oauth/userinfo', '/oauth/userinfo'], async (_site, { request }) => {
    const origin = request.headers.get('origin');
    const headers: Record<string, string> = { vary: 'Origin' };
    if (origin && (await originListed(svc.sql, origin))) {
      Object.assign(headers, {
        'access-control-allow-origin': origin,
        'access-control-allow-methods': 'GET, POST',
        'access-control-allow-headers': 'authorization',
        'access-control-max-age': '600',
      });
    }
    return new Response(null, { status: 204, headers });
  });
}
