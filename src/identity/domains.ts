import { Resolver } from 'node:dns/promises';
import type { Sql } from '../store/db.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { BadUserInput, Conflict, NotFound, PermissionDenied } from '../errors.ts';
import { CHALLENGE_PREFIX, challengeOf, type DomainChallenge } from './relying-parties.ts';

/**
 * `svc domains verify`: looks up the TXT record `_svc-challenge.<domain>` and marks the domain
 * verified when it holds the challenge token. `SVC_DNS_SERVER` (`host` or `host:port`) points
 * the lookup at a specific DNS server; unset, the system resolvers are used.
 */
function resolver(): Resolver {
  const r = new Resolver({ timeout: 3000, tries: 2 });
  const server = process.env.SVC_DNS_SERVER;
  if (server) r.setServers([server]);
  return r;
}

export async function verifyDomain(sql: Sql, caller: ControlCaller, projectId: string, domain: unknown): Promise<DomainChallenge & { verified: boolean; reason?: string }> {
  const project = await projectOfCaller(sql, caller, projectId);
  if (!memberMay(caller, 'domains:write', project.id)) throw new PermissionDenied('Verifying a domain needs permission domains:write');
  if (typeof domain !== 'string' || domain === '') throw new BadUserInput('domain is required');
  const [row] = await sql<{ id: string; domain: string; client_id: string; status: string; challenge_token: string; cname_target: string }[]>`
    select id, domain, client_id, status, challenge_token, cname_target from custom_domains
    where project_id = ${project.id} and domain = ${domain.toLowerCase()}`;
  if (!row) throw new NotFound("Domain not found: it is not registered in this project (add it to a relying party's customDomains and push)");
  if (row.status === 'verified') return { ...challengeOf(row), verified: true };
  const name = `${CHALLENGE_PREFIX}.${row.domain}`;
  let found: string[] = [];
  try {
    found = (await resolver().resolveTxt(name)).map((chunks) => chunks.join(''));
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'ERROR';
    return { ...challengeOf(row), verified: false, reason: `no TXT record ${name} found (${code})` };
  }
  if (!found.includes(row.challenge_token)) {
    return { ...challengeOf(row), verified: false, reason: `the TXT record ${name} does not hold the challenge token` };
  }
  try {
    await sql`update custom_domains set status = 'verified', verified_at = now() where id = ${row.id} and project_id = ${project.id}`;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw new Conflict(`domain ${row.domain} is already verified by another project`);
    throw err;
  }
  return { ...challengeOf({ ...row, status: 'verified' }), verified: true };
}
