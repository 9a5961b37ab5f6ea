import { Resolver } from 'node:dns/promises';
import type { Sql } from '../store/db.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { BadUserInput, Conflict, NotFound, PermissionDenied } from '../errors.ts';
import { CHALLENGE_PREFIX, challengeOf, type DomainChallenge } from './relying-parties.ts';

/**
 * `svc domains verify`: looks up both records of the challenge (the CNAME of the domain and the
 * TXT record `_svc-challenge.<domain>`) and marks the domain verified when both hold. `SVC_DNS_SERVER` (`host` or `host:port`) points
 * the lookup at a specific DNS server; unset, the system resolvers are used.
 */
function resolver(): Resolver {
  const r = new Resolver({ timeout: 3000, tries: 2 });
  const server = process.env.SVC_DNS_SERVER;
  if (server) r.setServers([server]);
  return r;
}

export async function verifyDomain(
  sql: Sql,
  caller: ControlCaller,
  projectId: string,
  domain: unknown,
): Promise<DomainChallenge & { verified: boolean; reason?: string; checks?: { cname: boolean; txt: boolean } }> {
  const project = await projectOfCaller(sql, caller, projectId);
  if (!memberMay(caller, 'domains:write', project.id))
    throw new PermissionDenied('Verifying a domain needs permission domains:write');
  if (typeof domain !== 'string' || domain === '') throw new BadUserInput('domain is required');
  const [row] = await sql<
    { id: string; domain: string; client_id: string; status: string; challenge_token: string; cname_target: string }[]
  >`
    select id, domain, client_id, status, challenge_token, cname_target from custom_domains
    where project_id = ${project.id} and domain = ${domain.toLowerCase()}`;
  if (!row)
    throw new NotFound(
      "Domain not found: it is not registered in this project (add it to a relying party's customDomains and push)",
    );
  if (row.status === 'verified') return { ...challengeOf(row), verified: true };
  const checks = await checkRecords(row);
  const missing = [checks.cname, checks.txt].filter((c): c is string => c !== null);
  if (missing.length > 0)
    return {
      ...challengeOf(row),
      verified: false,
      reason: missing.join('; '),
      checks: { cname: checks.cname === null, txt: checks.txt === null },
    };
  try {
    await sql`update custom_domains set status = 'verified', verified_at = now() where id = ${row.id} and project_id = ${project.id}`;
  } catch (err) {
    if ((err as { code?: string }).code === '23505')
      throw new Conflict(`domain ${row.domain} is already verified by another project`);
    throw err;
  }
  return { ...challengeOf({ ...row, status: 'verified' }), verified: true, checks: { cname: true, txt: true } };
}

const bare = (h: string) => h.toLowerCase().replace(/\.$/, '');

/**
 * Both records of the challenge: the CNAME `<domain>` → the auth host (so the domain reaches the
 * hosted login) and the TXT `_svc-challenge.<domain>` holding the token (so its owner added it).
 * Each is null when it holds, else the reason.
 */
async function checkRecords(row: {
  domain: string;
  challenge_token: string;
  cname_target: string;
}): Promise<{ cname: string | null; txt: string | null }> {
  const r = resolver();
  const txtName = `${CHALLENGE_PREFIX}.${row.domain}`;
  const [cname, txt] = await Promise.all([
    r.resolveCname(row.domain).then(
      (targets) =>
        targets.some((t) => bare(t) === bare(row.cname_target))
          ? null
          : `the CNAME record ${row.domain} points at ${targets.join(', ')}, not ${row.cname_target}`,
      (err) =>
        `no CNAME record ${row.domain} → ${row.cname_target} found (${(err as { code?: string }).code ?? 'ERROR'})`,
    ),
    r.resolveTxt(txtName).then(
      (found) =>
        found.map((chunks) => chunks.join('')).includes(row.challenge_token)
          ? null
          : `the TXT record ${txtName} does not hold the challenge token`,
      (err) => `no TXT record ${txtName} found (${(err as { code?: string }).code ?? 'ERROR'})`,
    ),
  ]);
  return { cname, txt };
}
