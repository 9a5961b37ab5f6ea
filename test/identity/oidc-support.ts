import * as oidc from 'openid-client';

/**
 * A browser as the hosted-login tests need one: a cookie jar per host (Set-Cookie with Max-Age=0
 * deletes), redirects not followed, forms read from the page and posted as a browser would.
 */
export class Browser {
  readonly jar = new Map<string, Map<string, string>>();

  /** Resolves a request's host to a local address while keeping the Host header (custom domains). */
  constructor(private readonly hosts: Record<string, string> = {}) {}

  cookies(host: string): Map<string, string> {
    let j = this.jar.get(host);
    if (!j) this.jar.set(host, (j = new Map()));
    return j;
  }

  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    const u = new URL(url);
    const jar = this.cookies(u.host);
    const headers = new Headers(init.headers);
    if (jar.size > 0) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    let target = u.toString();
    const mapped = this.hosts[u.host];
    if (mapped) {
      headers.set('host', u.host);
      target = `${u.protocol}//${mapped}${u.pathname}${u.search}`;
    }
    const res = await fetch(target, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const [k, ...v] = pair!.trim().split('=');
      if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) jar.delete(k!);
      else jar.set(k!, v.join('='));
    }
    return res;
  }

  /** GETs the page, fills the form of `step`, POSTs it to the form's action. */
  async submit(
    url: string | URL,
    step: string,
    fields: Record<string, string>,
  ): Promise<{ page: string; post: Response }> {
    const res = await this.fetch(url);
    const page = await res.text();
    if (res.status !== 200) throw new Error(`page answered ${res.status}: ${page.slice(0, 300)}`);
    return { page, post: await this.post(url, page, step, fields) };
  }

  async post(url: string | URL, page: string, step: string, fields: Record<string, string>): Promise<Response> {
    const { action, form } = formOf(page, step);
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    return this.fetch(new URL(action, url), { method: 'POST', body: form });
  }
}

/** The hidden inputs and action of the form whose step is `step`. */
export function formOf(page: string, step: string, provider?: string): { action: string; form: URLSearchParams } {
  const forms = page.split('<form').slice(1);
  const found = forms.find(
    (f) =>
      f.includes(`name="step" value="${step}"`) && (!provider || f.includes(`name="provider" value="${provider}"`)),
  );
  if (!found) throw new Error(`no ${step} form on the page`);
  const form = new URLSearchParams();
  for (const m of found.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g))
    form.set(m[1]!, unescapeHtml(m[2]!));
  return { action: unescapeHtml(/action="([^"]*)"/.exec(found)![1]!), form };
}

const unescapeHtml = (s: string) => s.replace(/&#(\d+);/g, (_, c) => String.fromCharCode(Number(c)));

/** A relying party's authorize URL with fresh PKCE, state and nonce. */
export async function authRequest(
  config: oidc.Configuration,
  redirect_uri: string,
  extra: Record<string, string> = {},
) {
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri,
    scope: 'openid email profile',
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { url, verifier, state, nonce };
}

export const PASSWORD = 'correct horse battery';
let n = 0;
export const newEmail = () => `s${++n}${Math.random().toString(16).slice(2, 8)}@example.com`;

export function discover(issuer: string, clientId: string, fetchImpl?: typeof fetch): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(issuer), clientId, { id_token_signed_response_alg: 'EdDSA' }, oidc.None(), {
    execute: [oidc.allowInsecureRequests],
    ...(fetchImpl ? { [oidc.customFetch]: fetchImpl } : {}),
  } as oidc.DiscoveryRequestOptions);
}
