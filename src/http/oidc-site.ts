import { randomBytes } from 'node:crypto';
import { sign, verify } from '../crypto/hmac.ts';
import type { Service } from '../service.ts';
import { secretsKey, secretsKeyring } from '../secrets-key.ts';
import { DomainDirectory } from '../identity/oidc/hosts.ts';
import { defaultSite, domainSite, type Site } from '../identity/oidc/protocol.ts';
import type { ProjectView } from '../identity/accounts.ts';

/**
 * What the hosted-login routes share: which site a request is for (the deployment's, or a
 * verified custom domain by `Host`), cookies, the CSRF token and response helpers.
 */
export const CSRF_COOKIE = 'svc_auth_csrf';
const PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; base-uri 'none'; frame-ancestors 'none'";
export const JSON_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store', pragma: 'no-cache' };

export function html(body: string, status: number, cookies: string[] = []): Response {
  const headers = new Headers({
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'content-security-policy': PAGE_CSP,
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  });
  for (const c of cookies) headers.append('set-cookie', c);
  return new Response(body, { status, headers });
}

export function redirect(location: string, cookies: string[] = []): Response {
  const headers = new Headers({ location, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' });
  for (const c of cookies) headers.append('set-cookie', c);
  return new Response(null, { status: 303, headers });
}

export function cookieOf(request: Request, name: string): string | null {
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return v.join('=');
  }
  return null;
}

/** Every cookie of the request whose name starts with `prefix`. */
export function cookiesWithPrefix(request: Request, prefix: string): [string, string][] {
  const out: [string, string][] = [];
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k && k.startsWith(prefix)) out.push([k, v.join('=')]);
  }
  return out;
}

export type Variant = 'default' | 'domain';
export type Ctx = {
  request: Request;
  query: Record<string, unknown>;
  body: unknown;
  server: { requestIP(r: Request): { address: string } | null } | null;
};
export type Handler = (site: Site, ctx: Ctx) => Promise<Response>;
/** Registers a handler on the deployment's path and on the custom-domain path. */
export type RouteFn = (method: 'get' | 'post' | 'options', paths: [string, string], handler: Handler) => void;

export const notFound = async (): Promise<Response> =>
  new Response(JSON.stringify({ error: 'NOT_FOUND', message: 'Not found' }), {
    status: 404,
    headers: { 'content-type': 'application/json' },
  });

export function hostedLogin(svc: Service) {
  const base = defaultSite(svc.settings.baseUrl, svc.settings.authUrl);
  const authPath = new URL(svc.settings.authUrl).pathname.replace(/\/$/, '');
  const scheme = new URL(svc.settings.authUrl).protocol;
  const domains = new DomainDirectory(svc.sql);
  const key = () => secretsKey(svc.settings.dataDir);

  /**
   * The site of a request. A verified custom domain's host is always its own site; other hosts
   * are the deployment's site on the default paths only (null: not found).
   */
  async function siteOf(request: Request, variant: Variant): Promise<Site | null> {
    const host = new URL(request.url).host;
    const owner = await domains.lookup(host.replace(/:\d+$/, ''));
    if (owner) return domainSite(`${scheme}//${host}`, owner);
    return variant === 'default' ? base : null;
  }

  const secure = (site: Site) => svc.settings.production || site.issuer.startsWith('https:');

  /** The browser's CSRF cookie (made when missing) and the token its forms carry. */
  function csrfOf(request: Request, site: Site): { token: string; setCookie: string | null; cookie: string } {
    let cookie = cookieOf(request, CSRF_COOKIE);
    let setCookie: string | null = null;
    if (!cookie || !/^[0-9a-f]{64}$/.test(cookie)) {
      cookie = randomBytes(32).toString('hex');
      setCookie = `${CSRF_COOKIE}=${cookie}; Path=${site.cookiePath}; HttpOnly; SameSite=Lax${secure(site) ? '; Secure' : ''}`;
    }
    return { token: hmac(`csrf\0${cookie}`), setCookie, cookie };
  }

  const hmac = (s: string) => sign(key(), s, 'base64url');

  /** Whether a posted form carries the token of the browser's CSRF cookie. */
  function csrfValid(request: Request, sent: unknown): boolean {
    const cookie = cookieOf(request, CSRF_COOKIE);
    if (!cookie) return false;
    return (
      typeof sent === 'string' && verify(secretsKeyring(svc.settings.dataDir), `csrf\0${cookie}`, sent, 'base64url')
    );
  }

  /** What a login and a token grant read of the party's project. */
  async function projectView(projectId: string): Promise<ProjectView> {
    const s = (await svc.projects.get(projectId)).snapshot;
    return { id: s.id, settings: s.settings, models: s.models };
  }

  return { base, authPath, siteOf, secure, csrfOf, csrfValid, hmac, projectView };
}

export type HostedLogin = ReturnType<typeof hostedLogin>;
