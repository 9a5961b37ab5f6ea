import type { Sql } from '../store/db.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { PermissionDenied } from '../errors.ts';
import type { Obj } from './check.ts';
import { readKeyed } from './apply-keyed.ts';
import { challengeOf, readRelyingParties, type DomainChallenge } from '../identity/relying-parties.ts';
import { readRolesForPull } from '../identity/customer-roles.ts';
import { SETTINGS_DEFAULTS } from './types.ts';
import { fleetMembershipOf } from '../projects/store.ts';

/**
 * The live config of a project (`svc pull`): what a push of it would reproduce. Collections
 * with no entries are left out. `domains` is read-only status (DNS challenges) that push ignores.
 */
export async function pullConfig(sql: Sql, caller: ControlCaller, projectId: string): Promise<Obj> {
  const project = await projectOfCaller(sql, caller, projectId);
  if (!memberMay(caller, 'config:read', project.id))
    throw new PermissionDenied('This role may not read the configuration');
  const [p] = await sql<
    { name: string; settings: Obj }[]
  >`select name, settings from projects where id = ${project.id}`;
  const [pin] = await sql<
    { key: string; name: string; config_type: string | null; operation_base_url: string | null; extra: Obj }[]
  >`
    select key, name, config_type, operation_base_url, extra from project_configs where project_id = ${project.id}`;
  const out: Obj = { key: pin?.key ?? project.id, name: pin?.name ?? p!.name };
  if (pin?.config_type) out.configType = pin.config_type;
  if (pin?.operation_base_url) out.operationBaseUrl = pin.operation_base_url;
  Object.assign(out, pin?.extra ?? {});
  out.project = {
    id: project.id,
    tenantId: project.tenantId,
    name: p!.name,
    settings: { ...SETTINGS_DEFAULTS, ...p!.settings },
  };

  // A fleet member's models are its group's published schema (src/fleet).
  const fleet = await fleetMembershipOf(sql, project.id);
  const models = fleet
    ? fleet.models.map((definition) => ({ definition: definition as unknown as Obj }))
    : await sql<
        { definition: Obj }[]
      >`select definition from models where project_id = ${project.id} order by position, key`;
  if (models.length > 0) out.models = models.map((m) => m.definition);
  for (const [name, table] of [
    ['operations', 'operations'],
    ['hooks', 'hooks'],
    ['schedules', 'schedules'],
    ['segments', 'segments'],
    ['authProviders', 'auth_providers'],
    ['placements', 'placements'],
  ] as const) {
    const rows = await readKeyed(sql, project.id, table);
    if (rows.length > 0) out[name] = rows.map((r) => r.definition);
  }
  const parties = await readRelyingParties(sql, project.id);
  if (parties.length > 0) out.relyingParties = parties;
  const keys = await sql<{ definition: Obj }[]>`
    select c.definition from config_api_keys c join api_keys k on k.id = c.api_key_id
    where c.project_id = ${project.id} and k.project_id = ${project.id} and k.deleted_at is null order by c.name`;
  if (keys.length > 0) out.apiKeys = keys.map((k) => k.definition);
  const roles = await readRolesForPull(sql, project.id);
  if (roles.length > 0) out.customerRoles = roles;
  const apps = await readKeyed(sql, project.id, 'apps');
  if (apps.length > 0) out.apps = Object.fromEntries(apps.map((a) => [a.key, a.definition]));
  const [tokens] = await sql<
    { document: string }[]
  >`select document::text as document from design_tokens where project_id = ${project.id}`;
  if (tokens) out.designTokens = JSON.parse(tokens.document);
  const domains = await listDomains(sql, project.id);
  if (domains.length > 0) out.domains = domains;
  return out;
}

export async function listDomains(sql: Sql, projectId: string): Promise<DomainChallenge[]> {
  const rows = await sql<
    { domain: string; client_id: string; status: string; challenge_token: string; cname_target: string }[]
  >`
    select domain, client_id, status, challenge_token, cname_target from custom_domains where project_id = ${projectId} order by domain`;
  return rows.map(challengeOf);
}
