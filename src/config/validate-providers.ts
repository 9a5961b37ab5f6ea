import type { Checker, Obj } from './check.ts';

/**
 * `config` of an `authProviders[]` entry of type `oauth2` (docs/oidc.md, "Upstream providers"):
 * an `issuer` (OpenID discovery) or the three endpoints, a `clientId`, the client secret by the
 * label of a project secret only (never its value), scopes and allowed email domains.
 */
const LABEL_RE = /^[A-Za-z][A-Za-z0-9_]{0,127}$/;
const DOMAIN_RE = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/;

/** https, or http to a loopback host (a provider on the same machine). */
function endpointProblem(v: string): string | null {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol === 'https:') return u.hash ? 'must not have a fragment' : null;
  if (u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname)) return null;
  return 'must be an https URL';
}

/** What an oauth2 config lacks to log anyone in (null: it has an issuer or the three endpoints). */
export function missingEndpoints(cfg: Record<string, unknown> | null | undefined): string[] | null {
  if (!cfg || typeof cfg.issuer === 'string') return null;
  const missing = ['authorizeUrl', 'tokenUrl', 'userinfoUrl'].filter((k) => typeof cfg[k] !== 'string');
  return missing.length > 0 ? ['issuer', ...missing] : null;
}

export function checkOauth2Config(c: Checker, v: unknown, p: string): void {
  const cfg = c.object(v, p, true) as Obj | null;
  if (!cfg) return;
  c.string(cfg, 'clientId', p, { required: true, max: 500 });
  if ('clientSecret' in cfg)
    c.add(
      `${p}.clientSecret`,
      'a client secret never goes in the config: declare it in svc.secrets.json, push it with svc secrets push, and name its label in clientSecretLabel',
    );
  c.string(cfg, 'clientSecretLabel', p, {
    pattern: LABEL_RE,
    hint: 'must be the label of a project secret (a letter, then letters, digits and _)',
  });
  const urls = ['issuer', 'authorizeUrl', 'tokenUrl', 'userinfoUrl'] as const;
  for (const k of urls) {
    const u = c.string(cfg, k, p, { max: 2000 });
    const why = u === null ? null : endpointProblem(u);
    if (why) c.add(`${p}.${k}`, `${k} "${u}" ${why}`);
  }
  // The spec's own example (a client id and allowed domains) is accepted: stored, held disabled
  // until it names where to send people (apply-keyed.ts), and reported as a warning.
  const missing = missingEndpoints(cfg);
  if (missing) {
    c.warn(
      p,
      `this oauth2 provider cannot log anyone in yet: it needs issuer (OpenID discovery) or authorizeUrl, tokenUrl and userinfoUrl (missing ${missing.join(', ')}); it is stored and stays disabled until then`,
    );
  }
  c.strings(cfg, 'scopes', p);
  (c.strings(cfg, 'allowedDomains', p) ?? []).forEach((d, i) => {
    if (!DOMAIN_RE.test(d))
      c.add(
        `${p}.allowedDomains[${i}]`,
        `${JSON.stringify(d.slice(0, 80))}${d.length > 80 ? '…' : ''} is not a lower-case domain name`,
      );
  });
}
