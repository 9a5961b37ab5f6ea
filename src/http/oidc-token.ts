import type { Service } from '../service.ts';
import { identityOf } from '../identity/identity.ts';
import type { ProjectView } from '../identity/accounts.ts';
import { discoveryDocument, parseClientId, tokenError } from '../identity/oidc/protocol.ts';
import { findParty, originListed } from '../identity/oidc/parties.ts';
import { exchangeCode, refreshGrant } from '../identity/oidc/codes.ts';
import { JSON_HEADERS, type HostedLogin, type RouteFn } from './oidc-site.ts';

/**
 * What a relying party's code calls, as JSON: the discovery document and the token endpoint
 * (authorization_code with PKCE, refresh_token; public clients only, CORS for their listed
 * origins). The browser pages of a login are in oidc.ts.
 */
export function oidcTokenRoutes(svc: Service, hl: HostedLogin, route: RouteFn): void {
  route(
    'get',
    ['/customer/.well-known/openid-configuration', '/.well-known/openid-configuration'],
    async (site) =>
      new Response(JSON.stringify(discoveryDocument(site)), {
        headers: {
          'content-type': 'application/json',
          'cache-control': 'public, max-age=300',
          'access-control-allow-origin': '*',
        },
      }),
  );
  route('options', ['/customer/oauth/token', '/oauth/token'], async (_site, { request }) => {
    const origin = request.headers.get('origin');
    const headers: Record<string, string> = { vary: 'Origin' };
    if (origin && (await originListed(svc.sql, origin))) {
      Object.assign(headers, {
        'access-control-allow-origin': origin,
        'access-control-allow-methods': 'POST',
        'access-control-allow-headers': 'content-type',
        'access-control-max-age': '600',
      });
    }
    return new Response(null, { status: 204, headers });
  });
  route('post', ['/customer/oauth/token', '/oauth/token'], async (site, { body, request }) => {
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
    if (!request.headers.get('content-type')?.startsWith('application/x-www-form-urlencoded'))
      return fail('invalid_request', 'the body must be application/x-www-form-urlencoded');
    for (const [k, v] of Object.entries(form))
      if (Array.isArray(v)) return fail('invalid_request', `${k} was sent more than once`);
    if (!party || !parseClientId(form.client_id) || (site.domain && site.domain.projectId !== party.projectId))
      return fail('invalid_client', 'unknown client_id');
    if (form.client_secret !== undefined || request.headers.get('authorization'))
      return fail('invalid_client', 'public clients authenticate with client_id only');
    let project: ProjectView;
    try {
      project = await hl.projectView(party.projectId);
    } catch {
      return fail('invalid_client', 'unknown client_id');
    }
    const ttl =
      typeof project.settings.customerAccessTokenTtlSeconds === 'number'
        ? project.settings.customerAccessTokenTtlSeconds
        : undefined;
    const id = identityOf(svc.bus);
    if (form.grant_type === 'authorization_code') {
      const out = await exchangeCode(svc.sql, id.tokens, {
        projectId: party.projectId,
        clientId: party.clientId,
        code: form.code,
        redirectUri: form.redirect_uri,
        verifier: form.code_verifier,
        issuer: site.issuer,
        ttlSeconds: ttl,
      });
      return out.ok ? reply(200, out.body) : fail(out.error, out.description);
    }
    if (form.grant_type === 'refresh_token') {
      const out = await refreshGrant(svc.sql, id.tokens, {
        projectId: party.projectId,
        clientId: party.clientId,
        refreshToken: form.refresh_token,
        ttlSeconds: ttl,
      });
      return out.ok ? reply(200, out.body) : fail(out.error, out.description);
    }
    return fail('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  });
}
