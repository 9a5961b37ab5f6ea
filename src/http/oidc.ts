import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { SvcError } from '../errors.ts';
import { identityOf } from '../identity/identity.ts';
import {
  loginCustomer,
  loginKnownCustomer,
  registerCustomer,
  type AuthPayload,
  type ProjectView,
} from '../identity/accounts.ts';
import { loginCustomerWithOtp, requestCustomerOtp } from '../identity/customer-otp.ts';
import { dropBrowserLoginSession, sessionOfRefreshToken } from '../identity/customer-sessions.ts';
import {
  browserSessionAllowed,
  checkAuthorize,
  redirectWith,
  wireClientId,
  type AuthorizeRequest,
  type Party,
  type Site,
} from '../identity/oidc/protocol.ts';
import { findParty } from '../identity/oidc/parties.ts';
import { issueCode } from '../identity/oidc/codes.ts';
import { cookieName, sessionCookie, startBrowserSession, useBrowserSession } from '../identity/oidc/browser.ts';
import { renderErrorPage, renderInfoPage, renderLoginPage, type PageModel } from '../identity/oidc/page.ts';
import {
  finishUpstream,
  linkCustomer,
  listProviders,
  providerNotReady,
  startUpstream,
  takeUpstreamState,
  UpstreamError,
  type Provider,
} from '../identity/oidc/upstream.ts';
import {
  cookieOf,
  CSRF_COOKIE,
  hostedLogin,
  html,
  notFound,
  redirect,
  type Ctx,
  type Handler,
  type Variant,
} from './oidc-site.ts';
import { oidcSessionRoutes } from './oidc-logout-userinfo.ts';
import { oidcTokenRoutes } from './oidc-token.ts';

/**
 * Hosted customer login (issue 16, docs/oidc.md): `{auth_url}/authorize` (GET shows the page
 * or, with a browser session, answers at once; POST is its forms) and the upstream providers'
 * callback; discovery and the token endpoint are in oidc-token.ts, logout and userinfo in
 * oidc-logout-userinfo.ts. Each route answers on the deployment's paths and, on a verified custom domain's
 * host, on that domain's own paths. The protocol lives in src/identity/oidc/.
 */

export function oidcRoutes(svc: Service) {
  const hl = hostedLogin(svc);
  const auth = hl.authPath;
  const app = new Elysia({ name: 'svc.oidc' });

  /** Registers a handler on the deployment's path and on the custom-domain path. */
  function route(method: 'get' | 'post' | 'options', paths: [string, string], handler: Handler): void {
    const seen = new Set<string>();
    for (const [path, variant] of [
      [paths[0], 'default'],
      [paths[1], 'domain'],
    ] as [string, Variant][]) {
      if (seen.has(path)) continue;
      seen.add(path);
      (app[method] as (p: string, h: (c: Ctx) => Promise<Response>) => unknown)(path, async (c: Ctx) => {
        const site = await hl.siteOf(c.request, variant);
        if (!site) return notFound();
        return handler(site, c);
      });
    }
  }

  function pageModel(site: Site, action: string, b: Flow, csrf: string): PageModel {
    const { party, project, request } = b;
    const set = project.settings;
    const on = (k: string, d: boolean) => (typeof set[k] === 'boolean' ? (set[k] as boolean) : d);
    const str = (k: string) => (typeof set[k] === 'string' ? (set[k] as string) : null);
    return {
      action: `${new URL(site.authBase).pathname.replace(/\/$/, '')}${action}`,
      party,
      request,
      csrf,
      branding: { displayName: str('displayName'), logoUrl: str('logoUrl'), primaryColor: str('primaryColor') },
      // A party can only narrow what the project enables.
      methods: {
        password: on('customerPasswordEnabled', true) && party.loginMethods.password,
        otp: on('customerOtpEnabled', false) && party.loginMethods.otp,
        signup: on('customerSignupEnabled', true),
      },
      providers: b.providers.map((p) => ({ key: p.key, name: p.name, isDefault: p.isDefault })),
    };
  }

  /** A login in progress: the party, its project, the request (null on a bare visit) and the buttons it shows. */
  type Flow = { party: Party; project: ProjectView; request: AuthorizeRequest | null; providers: Provider[] };
  type Begun = { done: Response } | Flow;

  async function flowOf(party: Party, request: AuthorizeRequest | null): Promise<Flow> {
    const project = await hl.projectView(party.projectId);
    // A party can only hide providers the project enables.
    const providers = (await listProviders(svc.sql, party.projectId)).filter(
      (p) => !party.loginMethods.disabledProviders.includes(p.key),
    );
    return { party, project, request, providers };
  }

  /** Validates an authorization request (or, on a custom domain's bare `/`, takes the domain's party). */
  async function begin(site: Site, params: Record<string, unknown>, bare: boolean): Promise<Begun> {
    if (bare) {
      const party = site.domain
        ? await findParty(svc.sql, wireClientId(site.domain.projectId, site.domain.clientId))
        : null;
      if (!party) return { done: html(renderErrorPage('This sign-in page is not set up.'), 404) };
      return flowOf(party, null);
    }
    const party = await findParty(svc.sql, params.client_id);
    if (party && site.domain && party.projectId !== site.domain.projectId) {
      return {
        done: html(renderErrorPage('This application does not sign in on this domain (unknown client_id).'), 400),
      };
    }
    const check = checkAuthorize(params, party);
    if (check.kind === 'page') return { done: html(renderErrorPage(check.message), 400) };
    if (check.kind === 'redirect') {
      return {
        done: redirect(
          redirectWith(check.redirectUri, {
            error: check.error,
            error_description: check.description,
            state: check.state,
            iss: site.issuer,
          }),
        ),
      };
    }
    try {
      return await flowOf(party!, check.request);
    } catch {
      return { done: html(renderErrorPage('This application is not known (unknown client_id).'), 400) };
    }
  }

  /** Where the login lands: the party's redirect (with a code) or, on a bare visit, postLoginUrl. */
  const landing = (b: { party: Party; request: AuthorizeRequest | null }) =>
    b.request ? b.request.redirect_uri : b.party.postLoginUrl;

  /** After a login: the code for the party (or the bare landing), plus the browser-session cookie. */
  async function complete(
    site: Site,
    b: Flow,
    payload: AuthPayload,
    authTime: Date,
    cookies: string[],
  ): Promise<Response> {
    if (!b.request) {
      // A bare login only needed the browser session; drop the tokens it made.
      const s = await sessionOfRefreshToken(svc.sql, b.party.projectId, payload.refreshToken);
      if (s) await dropBrowserLoginSession(svc.sql, s.sessionId);
      if (b.party.postLoginUrl) return redirect(b.party.postLoginUrl, cookies);
      return html(
        renderInfoPage('You are signed in', `Signed in as ${payload.customer.email}. You can close this page.`),
        200,
        cookies,
      );
    }
    const session = await sessionOfRefreshToken(svc.sql, b.party.projectId, payload.refreshToken);
    const code = await issueCode(svc.sql, {
      projectId: b.party.projectId,
      clientId: b.party.clientId,
      request: b.request,
      customerId: payload.customer.id,
      sessionId: session!.sessionId,
      loginRefreshToken: payload.refreshToken,
      allowedScopes: b.party.allowedScopes,
      issuer: site.issuer,
      authTime,
    });
    return redirect(redirectWith(b.request.redirect_uri, { code, state: b.request.state, iss: site.issuer }), cookies);
  }

  /** GET: a browser session answers at once (unless prompt=login or max_age is exceeded); otherwise the page. */
  const showPage =
    (bare: boolean, action: string): Handler =>
    async (site, { query, request }) => {
      const b = await begin(site, query, bare);
      if ('done' in b) return b.done;
      const land = landing(b);
      const cookies: string[] = [];
      if (b.request?.prompt !== 'login' && land && browserSessionAllowed(b.party, land)) {
        // biome-ignore lint/correctness/useHookAtTopLevel: not a hook; it uses up (checks and renews) the browser session
        const bs = await useBrowserSession(svc.sql, cookieOf(request, cookieName(b.party.projectId)), {
          projectId: b.party.projectId,
          host: site.host,
          maxAge: b.request?.max_age ?? null,
        });
        if (bs) {
          const payload = await loginKnownCustomer(identityOf(svc.bus), b.project, bs.customerId);
          if (payload)
            return complete(site, b, payload, bs.authTime, [
              sessionCookie(b.party.projectId, bs.token, { path: site.cookiePath, secure: hl.secure(site) }),
            ]);
        }
      }
      if (b.request?.prompt === 'none') {
        return redirect(
          redirectWith(b.request.redirect_uri, {
            error: 'login_required',
            error_description: 'the customer is not signed in in this browser',
            state: b.request.state,
            iss: site.issuer,
          }),
        );
      }
      const csrf = hl.csrfOf(request, site);
      if (csrf.setCookie) cookies.push(csrf.setCookie);
      return html(renderLoginPage(pageModel(site, action, b, csrf.token)), 200, cookies);
    };

  /** POST: one of the page's forms. */
  const postForm =
    (bare: boolean, action: string): Handler =>
    async (site, { body, request, server }) => {
      const form = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
      const b = await begin(site, form, bare);
      if ('done' in b) return b.done;
      if (!hl.csrfValid(request, form.csrf)) {
        return html(
          renderErrorPage(
            'The form expired or was sent from another site. Go back to the application and start again.',
          ),
          403,
        );
      }
      const model = pageModel(site, action, b, form.csrf as string);
      const id = identityOf(svc.bus);
      const ip = server?.requestIP(request)?.address ?? null;
      const email = typeof form.email === 'string' ? form.email.slice(0, 254) : undefined;
      let payload: AuthPayload;
      try {
        switch (form.step) {
          case 'password':
            if (!model.methods.password) throw new Error('method');
            payload = await loginCustomer(id, b.project, { email: form.email, password: form.password }, ip);
            break;
          case 'signup':
            if (!model.methods.signup || !model.methods.password) throw new Error('method');
            payload = await registerCustomer(id, b.project, {
              email: form.email,
              password: form.password,
              name: form.name || undefined,
            });
            break;
          case 'otp-request':
            if (!model.methods.otp) throw new Error('method');
            await requestCustomerOtp(id, b.project, { email: form.email });
            return html(
              renderLoginPage({
                ...model,
                email,
                otpSent: true,
                notice: 'If the address can sign in, a code is on its way. It is valid for 10 minutes.',
              }),
              200,
            );
          case 'otp':
            if (!model.methods.otp) throw new Error('method');
            payload = await loginCustomerWithOtp(id, b.project, { email: form.email, code: form.code }, ip);
            break;
          case 'upstream': {
            const provider = b.providers.find((p) => p.key === form.provider);
            if (!provider) {
              const name =
                typeof form.provider === 'string'
                  ? await providerNotReady(svc.sql, b.party.projectId, form.provider)
                  : null;
              if (name)
                throw new UpstreamError(
                  `Signing in with ${name} is not set up yet: the provider needs an issuer or its authorize, token and userinfo endpoints.`,
                );
              throw new Error('method');
            }
            return redirect(
              await startUpstream(svc.sql, svc.settings.dataDir, {
                projectId: b.party.projectId,
                provider,
                clientId: wireClientId(b.party.projectId, b.party.clientId),
                request: b.request,
                issuer: site.issuer,
                callbackUri: `${site.authBase}/callback`,
                browser: cookieOf(request, CSRF_COOKIE)!,
              }),
            );
          }
          default:
            throw new Error('method');
        }
      } catch (err) {
        if (!(err instanceof SvcError) && !(err instanceof UpstreamError) && (err as Error).message !== 'method')
          throw err;
        const message =
          err instanceof SvcError || err instanceof UpstreamError
            ? err.message
            : 'This way of signing in is not available here.';
        const status = err instanceof SvcError ? err.status : 400;
        return html(renderLoginPage({ ...model, email, otpSent: form.step === 'otp', error: message }), status);
      }
      return signedIn(site, b, request, payload);
    };

  /** A fresh login: the browser session (when the party allows one), then the code or the bare landing. */
  async function signedIn(site: Site, b: Flow, request: Request, payload: AuthPayload): Promise<Response> {
    const authTime = new Date();
    const cookies: string[] = [];
    const land = landing(b);
    if (land && browserSessionAllowed(b.party, land)) {
      const name = cookieName(b.party.projectId);
      const token = await startBrowserSession(svc.sql, {
        projectId: b.party.projectId,
        customerId: payload.customer.id,
        host: site.host,
        authTime,
        previous: cookieOf(request, name),
      });
      cookies.push(sessionCookie(b.party.projectId, token, { path: site.cookiePath, secure: hl.secure(site) }));
    }
    return complete(site, b, payload, authTime, cookies);
  }

  /** The upstream provider sends the browser back here with its code (or an error). */
  route('get', [`${auth}/callback`, '/callback'], async (site, { query, request }) => {
    const flow = await takeUpstreamState(svc.sql, query.state, cookieOf(request, CSRF_COOKIE));
    const party = flow && flow.issuer === site.issuer ? await findParty(svc.sql, flow.clientId) : null;
    if (!flow || !party)
      return html(
        renderErrorPage(
          'This sign-in attempt expired or was started in another browser. Go back to the application and start again.',
        ),
        403,
      );
    const b = await flowOf(party, flow.request);
    const action = b.request ? '/authorize' : '/';
    const csrf = hl.csrfOf(request, site);
    const again = (message: string) =>
      html(renderLoginPage({ ...pageModel(site, action, b, csrf.token), error: message }), 400);
    const provider = b.providers.find((p) => p.key === flow.providerKey);
    if (!provider) return again('This way of signing in is not available here.');
    if (query.error !== undefined) return again(`Signing in with ${provider.name} was cancelled or refused.`);
    let payload: AuthPayload | null;
    try {
      const who = await finishUpstream(
        svc.sql,
        svc.settings.dataDir,
        flow,
        provider,
        new URL(request.url).searchParams,
      );
      const signup =
        typeof b.project.settings.customerSignupEnabled === 'boolean' ? b.project.settings.customerSignupEnabled : true;
      const customerId = await linkCustomer(svc.sql, party.projectId, provider.key, who, signup);
      payload = await loginKnownCustomer(identityOf(svc.bus), b.project, customerId);
    } catch (err) {
      if (err instanceof UpstreamError) return again(err.message);
      throw err;
    }
    if (!payload) return again('This account is disabled.');
    return signedIn(site, b, request, payload);
  });

  route('get', [`${auth}/authorize`, '/authorize'], showPage(false, '/authorize'));
  route('post', [`${auth}/authorize`, '/authorize'], postForm(false, '/authorize'));
  // A bare visit to a custom domain: sign in, then land on the party's postLoginUrl.
  route('get', ['/', '/'], async (site, c) => (site.domain ? showPage(true, '/')(site, c) : notFound()));
  route('post', ['/', '/'], async (site, c) => (site.domain ? postForm(true, '/')(site, c) : notFound()));

  oidcTokenRoutes(svc, hl, route);
  oidcSessionRoutes(svc, hl, route);
  return app;
}
