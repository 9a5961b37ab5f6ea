import * as client from 'openid-client';
import { createHash } from 'node:crypto';
import { sign } from '../../crypto/hmac.ts';
import type { Sql } from '../../store/db.ts';
import { hashSecret, newId } from '../../ids.ts';
import { readSecret } from '../../secrets/vault.ts';
import { secretsKey } from '../../secrets-key.ts';
import type { AuthorizeRequest } from './protocol.ts';

/**
 * Upstream providers ("Continue with …", issue 16 item 6): an `authProviders[]` entry of type
 * `oauth2` makes svc a relying party of another OAuth 2.0 / OpenID provider. svc runs the
 * authorization-code flow with PKCE (S256), `state` and, for OpenID, `nonce` through
 * openid-client, then links the upstream identity to a customer of the project: by the linked
 * `sub` first, else by a *verified* email (an existing account is linked, a new one created when
 * sign-up is on). Config (`config` of the entry):
 *
 *   issuer          OpenID discovery (endpoints and ID-token checks come from it), or
 *   authorizeUrl, tokenUrl, userinfoUrl   explicit endpoints (plain OAuth 2.0 with a userinfo
 *                   endpoint that answers `sub`, `email`, `email_verified`)
 *   clientId        the client id at the provider
 *   clientSecretLabel  label of a project secret (`svc secrets push`); none: a public client
 *   scopes          default ['openid', 'email', 'profile'] with issuer, ['email'] otherwise
 *   allowedDomains  email domains that may sign in this way (none listed: any)
 */
export interface Provider {
  key: string;
  name: string;
  isDefault: boolean;
  priority: number;
  config: {
    issuer?: string;
    authorizeUrl?: string;
    tokenUrl?: string;
    userinfoUrl?: string;
    clientId: string;
    clientSecretLabel?: string;
    scopes?: string[];
    allowedDomains?: string[];
  };
}

export const STATE_MINUTES = 10;

/** Enabled oauth2 providers of a project, in button order (priority ascending, then config order). */
export async function listProviders(sql: Sql, projectId: string): Promise<Provider[]> {
  const rows = await sql<{ key: string; is_default: boolean; priority: number; definition: Record<string, unknown> }[]>`
    select key, is_default, priority, definition from auth_providers
    where project_id = ${projectId} and type = 'oauth2' and enabled order by priority, position, key`;
  const out = rows.map((r) => ({
    key: r.key,
    name: typeof r.definition.name === 'string' ? r.definition.name : r.key,
    isDefault: r.is_default,
    priority: r.priority,
    config: (r.definition.config ?? {}) as Provider['config'],
  }));
  // Rows stored before such providers were held disabled: never a button that cannot work.
  return out.filter((p) => canLogIn(p.config));
}

/** Whether a provider's config says where to send people: an issuer, or the three endpoints. */
export function canLogIn(c: Partial<Provider['config']>): boolean {
  return (
    typeof c.issuer === 'string' ||
    (typeof c.authorizeUrl === 'string' && typeof c.tokenUrl === 'string' && typeof c.userinfoUrl === 'string')
  );
}

/**
 * The name of a stored oauth2 provider that cannot log anyone in yet (a push accepts one with
 * only a client id and allowed domains, held disabled): the login page says so instead of a
 * generic refusal. Null when there is no such provider.
 */
export async function providerNotReady(sql: Sql, projectId: string, key: string): Promise<string | null> {
  if (typeof key !== 'string' || key.length > 128) return null;
  const [row] = await sql<{ definition: Record<string, unknown> }[]>`
    select definition from auth_providers where project_id = ${projectId} and key = ${key} and type = 'oauth2'`;
  if (!row) return null;
  const config = (row.definition.config ?? {}) as Partial<Provider['config']>;
  if (canLogIn(config)) return null;
  return typeof row.definition.name === 'string' ? row.definition.name : key;
}

/** Upstream lookups are allowed over plain http only to loopback hosts (tests, local providers). */
const insecureOk = (u: string) => /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?\//.test(u);

const configs = new Map<string, { until: number; config: client.Configuration }>();
const CONFIG_MS = 10 * 60_000;
const MAX_CONFIGS = 200;

async function configurationOf(
  sql: Sql,
  dataDir: string,
  projectId: string,
  p: Provider,
): Promise<client.Configuration> {
  const c = p.config;
  let secret: string | null = null;
  if (c.clientSecretLabel) {
    secret = await readSecret(sql, dataDir, projectId, c.clientSecretLabel);
    if (secret === null)
      throw new UpstreamError(`This sign-in option is not set up yet (the secret ${c.clientSecretLabel} is missing).`);
  }
  const cacheKey = createHash('sha256')
    .update(JSON.stringify([projectId, p.key, c, secret]))
    .digest('hex');
  const hit = configs.get(cacheKey);
  if (hit && hit.until > Date.now()) return hit.config;
  const auth = secret === null ? client.None() : client.ClientSecretPost(secret);
  let config: client.Configuration;
  if (c.issuer) {
    const url = new URL(c.issuer);
    const insecure = insecureOk(url.href.replace(/\/?$/, '/'));
    const found = await client.discovery(
      url,
      c.clientId,
      undefined,
      client.None(),
      insecure ? { execute: [client.allowInsecureRequests] } : undefined,
    );
    // ID tokens are checked with the algorithm the provider announces (ours signs with EdDSA).
    const algs = found.serverMetadata().id_token_signing_alg_values_supported;
    const alg = algs && !algs.includes('RS256') ? algs[0] : undefined;
    config = new client.Configuration(
      found.serverMetadata(),
      c.clientId,
      alg ? { id_token_signed_response_alg: alg } : undefined,
      auth,
    );
    if (insecure) client.allowInsecureRequests(config);
  } else {
    const server = {
      issuer: new URL(c.authorizeUrl!).origin,
      authorization_endpoint: c.authorizeUrl,
      token_endpoint: c.tokenUrl,
      userinfo_endpoint: c.userinfoUrl,
    };
    config = new client.Configuration(server, c.clientId, undefined, auth);
    if ([c.authorizeUrl!, c.tokenUrl!, c.userinfoUrl!].some(insecureOk)) client.allowInsecureRequests(config);
  }
  configs.delete(cacheKey);
  while (configs.size >= MAX_CONFIGS) configs.delete(configs.keys().next().value as string);
  configs.set(cacheKey, { until: Date.now() + CONFIG_MS, config });
  return config;
}

/** A refusal shown to the customer on the login page. */
export class UpstreamError extends Error {}

const scopesOf = (p: Provider) => p.config.scopes ?? (p.config.issuer ? ['openid', 'email', 'profile'] : ['email']);
const derive = (dataDir: string, what: string, state: string) =>
  sign(secretsKey(dataDir), `upstream-${what}\0${state}`, 'base64url');

export interface StartInput {
  projectId: string;
  provider: Provider;
  /** The party's wire client_id and its authorize request (null on a bare custom-domain visit). */
  clientId: string;
  request: AuthorizeRequest | null;
  issuer: string;
  callbackUri: string;
  /** The browser's CSRF cookie: the callback must come from the same browser. */
  browser: string;
}

/** Stores the flow and returns the upstream authorize URL to send the browser to. */
export async function startUpstream(sql: Sql, dataDir: string, s: StartInput): Promise<string> {
  const config = await configurationOf(sql, dataDir, s.projectId, s.provider);
  const state = client.randomState();
  const openid = scopesOf(s.provider).includes('openid');
  await sql`insert into auth_upstream_states (state_hash, project_id, provider_key, browser_hash, issuer, callback_uri, request, expires_at)
            values (${hashSecret(state)}, ${s.projectId}, ${s.provider.key}, ${hashSecret(s.browser)}, ${s.issuer}, ${s.callbackUri},
                    ${sql.json({ clientId: s.clientId, request: s.request } as never)}, now() + make_interval(mins => ${STATE_MINUTES}))`;
  await sql`delete from auth_upstream_states where expires_at < now() - interval '1 hour'`;
  const params: Record<string, string> = {
    redirect_uri: s.callbackUri,
    scope: scopesOf(s.provider).join(' '),
    state,
    code_challenge: await client.calculatePKCECodeChallenge(derive(dataDir, 'pkce', state)),
    code_challenge_method: 'S256',
  };
  if (openid) params.nonce = derive(dataDir, 'nonce', state);
  return client.buildAuthorizationUrl(config, params).href;
}

export interface UpstreamFlow {
  projectId: string;
  providerKey: string;
  issuer: string;
  clientId: string;
  request: AuthorizeRequest | null;
}

/**
 * The callback's first step: the flow its `state` names, spent once, from the same browser.
 * Null when unknown, expired, already used or started in another browser.
 */
export async function takeUpstreamState(
  sql: Sql,
  state: unknown,
  browser: string | null,
): Promise<(UpstreamFlow & { callbackUri: string; state: string }) | null> {
  if (typeof state !== 'string' || state.length === 0 || state.length > 200 || !browser) return null;
  const [row] = await sql<
    {
      project_id: string;
      provider_key: string;
      issuer: string;
      callback_uri: string;
      request: { clientId: string; request: AuthorizeRequest | null };
    }[]
  >`
    update auth_upstream_states set used_at = now()
    where state_hash = ${hashSecret(state)} and used_at is null and expires_at > now() and browser_hash = ${hashSecret(browser)}
    returning project_id, provider_key, issuer, callback_uri, request`;
  if (!row) return null;
  return {
    projectId: row.project_id,
    providerKey: row.provider_key,
    issuer: row.issuer,
    callbackUri: row.callback_uri,
    clientId: row.request.clientId,
    request: row.request.request,
    state,
  };
}

export interface UpstreamIdentity {
  subject: string;
  email: string;
  name: string | null;
}

/** Exchanges the upstream code (PKCE, state, nonce, ID token checked by openid-client) and reads who signed in. */
export async function finishUpstream(
  sql: Sql,
  dataDir: string,
  flow: { projectId: string; callbackUri: string; state: string },
  provider: Provider,
  query: URLSearchParams,
): Promise<UpstreamIdentity> {
  const config = await configurationOf(sql, dataDir, flow.projectId, provider);
  const openid = scopesOf(provider).includes('openid');
  const current = new URL(flow.callbackUri);
  for (const [k, v] of query) current.searchParams.append(k, v);
  let claims: Record<string, unknown>;
  try {
    const tokens = await client.authorizationCodeGrant(config, current, {
      pkceCodeVerifier: derive(dataDir, 'pkce', flow.state),
      expectedState: flow.state,
      ...(openid ? { expectedNonce: derive(dataDir, 'nonce', flow.state), idTokenExpected: true } : {}),
    });
    const id = tokens.claims();
    claims = id ? { ...id } : {};
    if (
      (typeof claims.email !== 'string' || claims.email_verified === undefined) &&
      config.serverMetadata().userinfo_endpoint
    ) {
      const info = await client.fetchUserInfo(config, tokens.access_token, id ? id.sub : client.skipSubjectCheck);
      claims = {
        ...info,
        ...claims,
        email: info.email ?? claims.email,
        email_verified: info.email_verified ?? claims.email_verified,
      };
    }
  } catch (err) {
    if (err instanceof UpstreamError) throw err;
    throw new UpstreamError(
      `Signing in with ${provider.name} did not work: ${(err as { error?: string }).error ?? 'the provider did not answer as expected'}.`,
    );
  }
  if (typeof claims.sub !== 'string' || claims.sub === '')
    throw new UpstreamError(`${provider.name} did not say who signed in.`);
  if (typeof claims.email !== 'string') throw new UpstreamError(`${provider.name} did not share an email address.`);
  if (claims.email_verified !== true && claims.email_verified !== 'true')
    throw new UpstreamError(
      `${provider.name} has not confirmed the email address ${claims.email}; confirm it there, or sign in another way.`,
    );
  const email = claims.email.trim().toLowerCase();
  const domain = email.slice(email.lastIndexOf('@') + 1);
  const allowed = provider.config.allowedDomains;
  if (Array.isArray(allowed) && allowed.length > 0 && !allowed.map((d) => d.toLowerCase()).includes(domain)) {
    throw new UpstreamError(`Addresses at ${domain} cannot sign in with ${provider.name}.`);
  }
  return { subject: claims.sub, email, name: typeof claims.name === 'string' ? claims.name.slice(0, 200) : null };
}

/**
 * The customer an upstream identity signs in as: the linked one, else the account with the
 * same (verified) email, which is linked now, else a new account when sign-up is on.
 */
export async function linkCustomer(
  sql: Sql,
  projectId: string,
  providerKey: string,
  who: UpstreamIdentity,
  signup: boolean,
): Promise<string> {
  return sql.begin(async (tx) => {
    const [linked] = await tx<{ customer_id: string; disabled_at: Date | null }[]>`
      select i.customer_id, c.disabled_at from customer_identities i join customers c on c.id = i.customer_id
      where i.project_id = ${projectId} and i.provider_key = ${providerKey} and i.subject = ${who.subject}`;
    if (linked) {
      if (linked.disabled_at) throw new UpstreamError('This account is disabled.');
      await tx`update customer_identities set last_login_at = now(), email = ${who.email}
               where project_id = ${projectId} and provider_key = ${providerKey} and subject = ${who.subject}`;
      return linked.customer_id;
    }
    let [c] = await tx<{ id: string; disabled_at: Date | null }[]>`
      select id, disabled_at from customers where project_id = ${projectId} and email = ${who.email} for update`;
    if (c?.disabled_at) throw new UpstreamError('This account is disabled.');
    if (c) {
      // The provider confirmed the address: the account's email is confirmed too.
      await tx`update customers set email_verified_at = coalesce(email_verified_at, now()) where id = ${c.id}`;
    } else {
      if (!signup) throw new UpstreamError(`There is no account for ${who.email}, and sign-up is closed.`);
      [c] = await tx<{ id: string; disabled_at: Date | null }[]>`
        insert into customers (id, project_id, email, name, email_verified_at) values (${newId('cus')}, ${projectId}, ${who.email}, ${who.name}, now())
        returning id, disabled_at`;
    }
    await tx`insert into customer_identities (project_id, provider_key, subject, customer_id, email) values (${projectId}, ${providerKey}, ${who.subject}, ${c!.id}, ${who.email})`;
    return c!.id;
  });
}
