import { Elysia } from 'elysia';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Service } from '../service.ts';
import { SvcError } from '../errors.ts';
import { identityOf } from '../identity/identity.ts';
import { loginCustomer, loginCustomerWithOtp, registerCustomer, requestCustomerOtp, type AuthPayload, type ProjectView } from '../identity/accounts.ts';
import { refreshSession, sessionOfRefreshToken } from '../identity/sessions.ts';
import { secretsKey } from '../secrets/vault.ts';
import { checkAuthorize, discoveryDocument, issuerOf, parseClientId, redirectWith, tokenError, type Party } from '../identity/oidc/protocol.ts';
import { findParty, originListed } from '../identity/oidc/parties.ts';
import { exchangeCode, issueCode } from '../identity/oidc/codes.ts';
import { renderErrorPage, renderLoginPage, type PageModel } from '../identity/oidc/page.ts';

/**
 * Hosted customer login (issue 16, docs/oidc.md): discovery, `{auth_url}/authorize` (GET shows
 * the page, POST is its forms) and `POST /customer/oauth/token`. The protocol lives in
 * src/identity/oidc/; this adapter reads requests and writes responses.
 */
const CSRF_COOKIE = 'svc_auth_csrf';
const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; base-uri 'none'; frame-ancestors 'none'";
const JSON_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store', pragma: 'no-cache' };

function html(body: string, status: number, extra: Record<string, string> = {}): Response {
  return new Response(body, {
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': PAGE_CSP, 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer', ...extra },
  });
}

function cookieOf(header: string | null, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return null;
}

const flat = (o: Record<string, unknown>): Record<string, unknown> => o;

export function oidcRoutes(svc: Service) {
  const endpoints = { baseUrl: svc.settings.baseUrl, authUrl: svc.settings.authUrl };
  const authPath = new URL(svc.settings.authUrl).pathname.replace(/\/$/, '');
  const authorizePath = `${authPath}/authorize`;
  const secure = svc.settings.authUrl.startsWith('https:');
  const csrfFor = (cookie: string) => createHmac('sha256', secretsKey(svc.settings.dataDir)).update(`csrf\0${cookie}`).digest('base64url');

  async function projectView(projectId: string): Promise<ProjectView> {
    const s = (await svc.projects.get(projectId)).snapshot;
    return { id: s.id, settings: s.settings, models: s.models };
  }

  function pageModel(party: Party, project: ProjectView, request: PageModel['request'], csrf: string): PageModel {
    const set = project.settings;
    const on = (k: string, d: boolean) => (typeof set[k] === 'boolean' ? (set[k] as boolean) : d);
    const str = (k: string) => (typeof set[k] === 'string' ? (set[k] as string) : null);
    return {
      action: authorizePath,
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
    };
  }

  /** Validates the request; returns the response to send, or what the page needs. */
  async function begin(params: Record<string, unknown>) {
    const party = await findParty(svc.sql, params.client_id);
    const check = checkAuthorize(params, party);
    if (check.kind === 'page') return { done: html(renderErrorPage(check.message), 400) };
    if (check.kind === 'redirect') {
      return { done: Response.redirect(redirectWith(check.redirectUri, { error: check.error, error_description: check.description, state: check.state, iss: issuerOf(endpoints) }), 303) };
    }
    let project: ProjectView;
    try {
      project = await projectView(party!.projectId);
    } catch {
      return { done: html(renderErrorPage('This application is not known (unknown client_id).'), 400) };
    }
    return { party: party!, project, request: check.request };
  }

  return new Elysia({ name: 'svc.oidc' })
    .get('/customer/.well-known/openid-configuration', () =>
      new Response(JSON.stringify({ ...discoveryDocument(endpoints), authorization_response_iss_parameter_supported: true }), {
        headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300', 'access-control-allow-origin': '*' },
      }),
    )
    .get(authorizePath, async ({ query, request }) => {
      const b = await begin(flat(query));
      if ('done' in b) return b.done;
      let cookie = cookieOf(request.headers.get('cookie'), CSRF_COOKIE);
      const extra: Record<string, string> = {};
      if (!cookie || !/^[0-9a-f]{64}$/.test(cookie)) {
        cookie = randomBytes(32).toString('hex');
        extra['set-cookie'] = `${CSRF_COOKIE}=${cookie}; Path=${authPath || '/'}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
      }
      return html(renderLoginPage(pageModel(b.party, b.project, b.request, csrfFor(cookie))), 200, extra);
    })
    .post(authorizePath, async ({ body, request, server }) => {
      const form = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
      const b = await begin(form);
      if ('done' in b) return b.done;
      const cookie = cookieOf(request.headers.get('cookie'), CSRF_COOKIE);
      const sent = typeof form.csrf === 'string' ? Buffer.from(form.csrf) : Buffer.alloc(0);
      const want = cookie ? Buffer.from(csrfFor(cookie)) : null;
      if (!want || sent.length !== want.length || !timingSafeEqual(sent, want)) {
        return html(renderErrorPage('The form expired or was sent from another site. Go back to the application and start again.'), 403);
      }
      const model = pageModel(b.party, b.project, b.request, csrfFor(cookie!));
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
            payload = await registerCustomer(id, b.project, { email: form.email, password: form.password, name: form.name || undefined });
            break;
          case 'otp-request':
            if (!model.methods.otp) throw new Error('method');
            await requestCustomerOtp(id, b.project, { email: form.email });
            return html(renderLoginPage({ ...model, email, otpSent: true, notice: 'If the address can sign in, a code is on its way. It is valid for 10 minutes.' }), 200);
          case 'otp':
            if (!model.methods.otp) throw new Error('method');
            payload = await loginCustomerWithOtp(id, b.project, { email: form.email, code: form.code }, ip);
            break;
          default:
            throw new Error('method');
        }
      } catch (err) {
        if (!(err instanceof SvcError) && (err as Error).message !== 'method') throw err;
        const message = err instanceof SvcError ? err.message : 'This way of signing in is not available here.';
        const status = err instanceof SvcError ? err.status : 400;
        return html(renderLoginPage({ ...model, email, otpSent: form.step === 'otp', error: message }), status);
      }
      const session = await sessionOfRefreshToken(svc.sql, b.party.projectId, payload.refreshToken);
      const code = await issueCode(svc.sql, {
        projectId: b.party.projectId, clientId: b.party.clientId, request: b.request, customerId: payload.customer.id,
        sessionId: session!.sessionId, loginRefreshToken: payload.refreshToken, allowedScopes: b.party.allowedScopes,
      });
      return Response.redirect(redirectWith(b.request.redirect_uri, { code, state: b.request.state, iss: issuerOf(endpoints) }), 303);
    })
    .options('/customer/oauth/token', async ({ request }) => {
      const origin = request.headers.get('origin');
      const headers: Record<string, string> = { vary: 'Origin' };
      if (origin && (await originListed(svc.sql, origin))) {
        Object.assign(headers, { 'access-control-allow-origin': origin, 'access-control-allow-methods': 'POST', 'access-control-allow-headers': 'content-type', 'access-control-max-age': '600' });
      }
      return new Response(null, { status: 204, headers });
    })
    .post('/customer/oauth/token', async ({ body, request }) => {
      const form = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
      const party = await findParty(svc.sql, form.client_id);
      const origin = request.headers.get('origin');
      const headers: Record<string, string> = { ...JSON_HEADERS, vary: 'Origin' };
      if (origin && party?.allowedOrigins.includes(origin)) headers['access-control-allow-origin'] = origin;
      const reply = (status: number, b: unknown) => new Response(JSON.stringify(b), { status, headers });
      const fail = (error: string, description: string) => {
        const e = tokenError(error, description);
        return reply(e.status, e.body);
      };
      if (!request.headers.get('content-type')?.startsWith('application/x-www-form-urlencoded')) return fail('invalid_request', 'the body must be application/x-www-form-urlencoded');
      for (const [k, v] of Object.entries(form)) if (Array.isArray(v)) return fail('invalid_request', `${k} was sent more than once`);
      if (!party || !parseClientId(form.client_id)) return fail('invalid_client', 'unknown client_id');
      if (form.client_secret !== undefined || request.headers.get('authorization')) return fail('invalid_client', 'public clients authenticate with client_id only');
      let project: ProjectView;
      try {
        project = await projectView(party.projectId);
      } catch {
        return fail('invalid_client', 'unknown client_id');
      }
      const ttl = typeof project.settings.customerAccessTokenTtlSeconds === 'number' ? project.settings.customerAccessTokenTtlSeconds : undefined;
      const id = identityOf(svc.bus);
      if (form.grant_type === 'authorization_code') {
        const out = await exchangeCode(svc.sql, id.tokens, {
          projectId: party.projectId, clientId: party.clientId, code: form.code, redirectUri: form.redirect_uri, verifier: form.code_verifier, issuer: issuerOf(endpoints), ttlSeconds: ttl,
        });
        return out.ok ? reply(200, out.body) : fail(out.error, out.description);
      }
      if (form.grant_type === 'refresh_token') {
        try {
          const out = await refreshSession(svc.sql, id.tokens, party.projectId, form.refresh_token as string, ttl);
          return reply(200, { access_token: out.accessToken, token_type: 'Bearer', expires_in: out.expiresIn, refresh_token: out.refreshToken });
        } catch (err) {
          if (err instanceof SvcError) return fail('invalid_grant', 'the refresh token is invalid, expired or revoked');
          throw err;
        }
      }
      return fail('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
    });
}
