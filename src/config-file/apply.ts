import type { Service } from '../service.ts';
import type { Sql } from '../store/db.ts';
import { BadUserInput, Conflict, PermissionDenied } from '../errors.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { announceSchema, replaceModels } from '../models/store.ts';
import type { ModelDef } from '../models/types.ts';
import { createApiKey, deleteApiKey } from '../auth/keys.ts';
import type { Obj } from './check.ts';
import { validateConfig } from './validate.ts';
import { applyKeyed, entryKeys, keyedTables } from './apply-keyed.ts';
import { applyRelyingParties, type DomainChallenge } from './apply-parties.ts';
import { upsertRole } from './customer-roles.ts';
import { SETTINGS_DEFAULTS, type ConfigError } from './types.ts';

/** What `svc push` prints (CONTRACT §3), plus what the CLI needs and never prints. */
export interface PushResult {
  projectId: string;
  applied: Record<string, number>;
  errors: ConfigError[];
  /** Domains registered by this push and the DNS records they need. Present only when non-empty. */
  domains?: DomainChallenge[];
  /** New key values for the CLI to write into `.env`; never printed. */
  apiKeys?: { name: string; envVar: string; key: string }[];
}

/** Top-level fields with their own handling; everything else is passed through. */
const KNOWN = new Set([
  'key', 'name', 'configType', 'force', 'operationBaseUrl', 'project', 'models', 'operations', 'segments', 'schedules', 'hooks',
  'authProviders', 'relyingParties', 'placements', 'apiKeys', 'customerRoles', 'apps', 'designTokens', 'domains',
]);
const KEYED = ['operations', 'hooks', 'schedules', 'segments', 'authProviders', 'placements'] as const;

/**
 * Applies a config to a project in one transaction. Validation errors apply nothing.
 * Permission errors of single entries (relying parties, domains) skip those entries only.
 */
export async function pushConfig(svc: Service, caller: ControlCaller, projectId: string, input: unknown, opts: { force?: boolean } = {}): Promise<PushResult> {
  const project = await projectOfCaller(svc.sql, caller, projectId);
  if (!memberMay(caller, 'config:push', project.id)) throw new PermissionDenied('This role may not push configuration (viewers cannot push)');
  const { config, errors } = validateConfig(input);
  if (!config) return { projectId: project.id, applied: {}, errors };
  const pin = config.project;
  if (pin && pin.tenantId !== project.tenantId) throw new PermissionDenied(`the config is pinned to tenant ${pin.tenantId}, not this project's tenant`);
  if (pin && pin.id !== project.id) throw new Conflict(`the config is pinned to project ${pin.id}; refusing to push it to ${project.id}`);
  const force = opts.force === true || config.force === true;
  const cfg = config as unknown as Obj;
  const may = (perm: 'relyingparties:write' | 'domains:write') => memberMay(caller, perm, project.id);
  const applied: Record<string, number> = {};
  const entryErrors: ConfigError[] = [];
  const registered: DomainChallenge[] = [];
  const newKeys: { name: string; envVar: string; key: string }[] = [];
  const tenantId = project.tenantId;

  const outcome = await svc.sql.begin(async (txRaw) => {
    const tx = txRaw as unknown as Sql;
    // Serialises pushes to one project.
    await tx`select id from projects where id = ${project.id} for update`;
    const extra = Object.fromEntries(Object.entries(cfg).filter(([k]) => !KNOWN.has(k)));
    await tx`insert into project_configs (project_id, key, name, config_type, operation_base_url, extra)
             values (${project.id}, ${config.key}, ${config.name}, ${config.configType ?? null}, ${config.operationBaseUrl ?? null}, ${tx.json(extra as never)})
             on conflict (project_id) do update set key = excluded.key, name = excluded.name, config_type = excluded.config_type,
               operation_base_url = excluded.operation_base_url, extra = excluded.extra, pushed_at = now()`;
    let projectChanged = false;
    if (pin) {
      if (typeof pin.name === 'string') await tx`update projects set name = ${pin.name} where id = ${project.id}`;
      // Omitted settings leave the platform's settings untouched.
      if (pin.settings) await tx`update projects set settings = ${tx.json({ ...SETTINGS_DEFAULTS, ...pin.settings } as never)} where id = ${project.id}`;
      projectChanged = typeof pin.name === 'string' || pin.settings !== undefined;
      applied.project = 1;
    }
    let schemaVersion: number | null = null;
    if (config.models) {
      if (force) await tx`delete from models where project_id = ${project.id}`;
      schemaVersion = await replaceModels(tx, project.id, config.models as unknown as ModelDef[]);
      applied.models = config.models.length;
    }
    const tables = keyedTables(config.operationBaseUrl);
    for (const name of KEYED) {
      const entries = cfg[name] as Obj[] | undefined;
      if (!entries) continue;
      applied[name] = await applyKeyed(tx, project.id, tables[name]!, entryKeys(name, entries), entries, force);
    }
    if (config.apps) {
      const entries = Object.values(config.apps) as Obj[];
      applied.apps = await applyKeyed(tx, project.id, tables.apps!, Object.keys(config.apps), entries, force);
    }
    if (config.relyingParties) {
      const cnameTarget = new URL(svc.settings.authUrl).hostname;
      const ctx = { tx, projectId: project.id, may, cnameTarget, errors: entryErrors, registered };
      applied.relyingParties = await applyRelyingParties(ctx, config.relyingParties as unknown as Obj[], force);
    }
    if (config.customerRoles) {
      for (const role of config.customerRoles) await upsertRole(tx, project.id, role as unknown as Obj);
      applied.customerRoles = config.customerRoles.length;
    }
    if (config.designTokens) {
      await tx`insert into design_tokens (project_id, document) values (${project.id}, ${tx.json(config.designTokens as never)})
               on conflict (project_id) do update set document = excluded.document, updated_at = now()`;
      applied.designTokens = 1;
    }
    if (config.apiKeys) applied.apiKeys = await applyApiKeys(svc, tx, project.id, tenantId, config.apiKeys as unknown as Obj[], force, newKeys);
    return { schemaVersion, projectChanged };
  });
  if (outcome.schemaVersion !== null) await announceSchema(svc.bus, project.id, outcome.schemaVersion);
  else if (outcome.projectChanged) await svc.bus.publish({ type: 'project.changed', projectId: project.id });
  return {
    projectId: project.id,
    applied,
    errors: entryErrors,
    ...(registered.length > 0 ? { domains: registered } : {}),
    ...(newKeys.length > 0 ? { apiKeys: newKeys } : {}),
  };
}

function keyShape(e: Obj): string {
  return JSON.stringify([e.keyType, e.scopes ?? null, e.allowedModels ?? null, e.allowedFileTypes ?? null]);
}

/**
 * Keys are matched by name. A key whose grants changed is rotated (grants are fixed at
 * creation); an unchanged one is left alone, so a second push creates no duplicate.
 * Keys that left the config are kept: deleting a credential is never a side effect of a push.
 */
async function applyApiKeys(svc: Service, tx: Sql, projectId: string, tenantId: string, entries: Obj[], force: boolean, out: { name: string; envVar: string; key: string }[]): Promise<number> {
  for (const e of entries) {
    const name = String(e.name);
    const [have] = await tx<{ api_key_id: string; definition: Obj; deleted: boolean }[]>`
      select c.api_key_id, c.definition, (k.deleted_at is not null) as deleted
      from config_api_keys c join api_keys k on k.id = c.api_key_id
      where c.project_id = ${projectId} and c.name = ${name}`;
    if (have && !have.deleted && !force && keyShape(have.definition) === keyShape(e)) {
      await tx`update config_api_keys set definition = ${tx.json(e as never)} where project_id = ${projectId} and name = ${name}`;
      continue;
    }
    if (have && !have.deleted) await deleteApiKey(tx, svc.bus, tenantId, have.api_key_id);
    const kind = e.keyType === 'secret' ? 'sk' : 'pk';
    let created: { id: string; key: string };
    try {
      created = await createApiKey(tx, svc.bus, {
        tenantId, kind, projectId, name, scopes: (e.scopes as string[] | undefined) ?? ['records:read'], allowedModels: e.allowedModels ?? null,
      });
    } catch (err) {
      throw new BadUserInput(`apiKeys "${name}": ${(err as Error).message}`);
    }
    if (Array.isArray(e.allowedFileTypes)) {
      await tx`update api_keys set allowed_file_types = ${e.allowedFileTypes as string[]} where id = ${created.id} and project_id = ${projectId}`;
    }
    await tx`insert into config_api_keys (project_id, name, api_key_id, definition) values (${projectId}, ${name}, ${created.id}, ${tx.json(e as never)})
             on conflict (project_id, name) do update set api_key_id = excluded.api_key_id, definition = excluded.definition`;
    out.push({ name, envVar: String(e.envVar), key: created.key });
  }
  return entries.length;
}
