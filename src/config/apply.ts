import type { Settings } from '../env.ts';
import type { BusEvent, EventBus } from '../bus/bus.ts';
import type { Sql } from '../store/db.ts';
import { BadUserInput, Conflict, PermissionDenied, SvcError } from '../errors.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import {
  announceSchema,
  canonicalJson,
  fleetMembershipOf,
  fleetModelsRefusal,
  replaceModels,
} from '../projects/store.ts';
import type { ModelDef } from '../projects/types.ts';
import { createApiKey, deleteApiKey, type KeyAnnouncer } from '../auth/api-keys.ts';
import type { Obj } from './check.ts';
import { validateConfig } from './validate.ts';
import { salvage, type Salvaged } from './salvage.ts';
import { applyKeyed, entryKeys, keyedTables } from './apply-keyed.ts';
import { applyRelyingParties, type DomainChallenge } from '../identity/relying-parties.ts';
import { upsertRole } from '../identity/customer-roles.ts';
import { SETTINGS_DEFAULTS, type ConfigError } from './types.ts';
import { prepareApps, type PreparedApps } from '../apps/install.ts';

/** What applying a config needs from the process: the database, the bus, the auth URL. */
export interface ConfigDeps {
  sql: Sql;
  bus: EventBus;
  settings: Pick<Settings, 'authUrl' | 'operations' | 'appsCa'>;
  /**
   * Trusted documents (src/graphql/trusted.ts, handed in by the HTTP layer: config does not
   * depend on GraphQL): the config's `documents` manifest is stored after the commit, and every
   * schema change re-validates the stored ones; their problems are listed with the push's errors.
   */
  documents?: {
    push(
      projectId: string,
      manifest: unknown,
      replace: boolean,
    ): Promise<{ applied: { documents: number }; errors: ConfigError[] }>;
    revalidate(projectId: string): Promise<ConfigError[]>;
  };
}

/** What `svc push` prints (CONTRACT §3), plus what the CLI needs and never prints. */
export interface PushResult {
  projectId: string;
  applied: Record<string, number>;
  errors: ConfigError[];
  /** What applied but will not work yet (an auth provider without an issuer…); never fails a push. */
  warnings: ConfigError[];
  /** Domains registered by this push and the DNS records they need. Present only when non-empty. */
  domains?: DomainChallenge[];
  /** New key values for the CLI to write into `.env`; never printed. */
  apiKeys?: { name: string; envVar: string; key: string }[];
}

/** Top-level fields with their own handling; everything else is passed through. */
const KNOWN = new Set([
  'key',
  'name',
  'configType',
  'force',
  'operationBaseUrl',
  'project',
  'models',
  'operations',
  'segments',
  'schedules',
  'hooks',
  'authProviders',
  'relyingParties',
  'placements',
  'apiKeys',
  'customerRoles',
  'apps',
  'designTokens',
  'domains',
  'documents',
]);
const KEYED = ['operations', 'hooks', 'schedules', 'segments', 'authProviders', 'placements'] as const;

/**
 * Applies a config to a project in one transaction. An invalid entry of a model, key, operation,
 * hook, segment, auth provider or customer role is skipped and reported while every valid entry
 * applies (salvage.ts); any other validation error, or any error at all with `atomic`, applies
 * nothing. Permission errors of single entries (relying parties, domains) skip those entries only.
 */
export async function pushConfig(
  svc: ConfigDeps,
  caller: ControlCaller,
  projectId: string,
  input: unknown,
  opts: { force?: boolean; atomic?: boolean } = {},
): Promise<PushResult> {
  const project = await projectOfCaller(svc.sql, caller, projectId);
  if (!memberMay(caller, 'config:push', project.id))
    throw new PermissionDenied('This role may not push configuration (viewers cannot push)');
  const atomic = opts.atomic === true;
  const validated = validateConfig(input);
  let config = validated.config;
  let keep: Salvaged['keep'] = {};
  const entryErrors: ConfigError[] = [];
  if (!config) {
    const saved = atomic ? null : salvage(input, validated.errors);
    if (!saved) return { projectId: project.id, applied: {}, errors: validated.errors, warnings: validated.warnings };
    ({ config, keep } = saved);
    entryErrors.push(...saved.errors);
  }
  const pin = config.project;
  if (pin && pin.tenantId !== project.tenantId)
    throw new PermissionDenied(`the config is pinned to tenant ${pin.tenantId}, not this project's tenant`);
  if (pin && pin.id !== project.id)
    throw new Conflict(`the config is pinned to project ${pin.id}; refusing to push it to ${project.id}`);
  const force = opts.force === true || config.force === true;
  const cfg = config as unknown as Obj;
  // Manifests are fetched before the transaction: no network call holds it open.
  let apps: PreparedApps | null = null;
  if (config.apps) {
    apps = await prepareApps(
      svc.sql,
      project.id,
      config.apps as unknown as Record<string, Obj>,
      (config.models as unknown as ModelDef[] | undefined) ?? null,
      {
        policy: { publicOnly: svc.settings.operations.publicOnly },
        ...(svc.settings.appsCa ? { ca: svc.settings.appsCa } : {}),
      },
    );
    entryErrors.push(...apps.problems);
    if (atomic && apps.problems.length)
      return { projectId: project.id, applied: {}, errors: entryErrors, warnings: validated.warnings };
  }
  const may = (perm: 'relyingparties:write' | 'domains:write') => memberMay(caller, perm, project.id);
  const applied: Record<string, number> = {};
  const registered: DomainChallenge[] = [];
  const newKeys: { name: string; envVar: string; key: string }[] = [];
  const tenantId = project.tenantId;
  // Key changes are announced with the commit, never before it: another process told early
  // would re-read (and cache, for up to 60 s) the key rows this transaction is still changing.
  const keyEvents: BusEvent[] = [];
  const announcer: KeyAnnouncer = { publish: async (e) => void keyEvents.push(e) };

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
      if (pin.settings)
        await tx`update projects set settings = ${tx.json({ ...SETTINGS_DEFAULTS, ...pin.settings } as never)} where id = ${project.id}`;
      projectChanged = typeof pin.name === 'string' || pin.settings !== undefined;
      applied.project = 1;
    }
    let schemaVersion: number | null = null;
    // A fleet member's models are its group's schema: a push may repeat them, never change them.
    const fleet = config.models ? await fleetMembershipOf(tx, project.id) : null;
    if (config.models && fleet) {
      if (canonicalJson(config.models) !== canonicalJson(fleet.models)) {
        const message = fleetModelsRefusal(project.id, fleet);
        if (atomic) throw new Conflict(message, { group: fleet.groupKey });
        entryErrors.push({ path: 'models', message });
      }
      applied.models = 0;
    } else if (config.models) {
      const models = [...(config.models as unknown as ModelDef[])];
      // A skipped (invalid) model keeps its live definition rather than disappearing.
      const kept = (keep.models ?? []).filter((k) => !models.some((m) => m.key === k));
      if (kept.length > 0) {
        const live = await tx<
          { definition: ModelDef }[]
        >`select definition from models where project_id = ${project.id} and key = any(${kept}) order by position`;
        models.push(...live.map((r) => r.definition));
      }
      if (force) await tx`delete from models where project_id = ${project.id}`;
      schemaVersion = await replaceModels(tx, project.id, models);
      applied.models = config.models.length;
    }
    const tables = keyedTables(config.operationBaseUrl);
    for (const name of KEYED) {
      const entries = cfg[name] as Obj[] | undefined;
      if (!entries) continue;
      applied[name] = await applyKeyed(
        tx,
        project.id,
        tables[name]!,
        entryKeys(name, entries),
        entries,
        force,
        keep[name as keyof typeof keep] ?? [],
      );
    }
    if (config.apps && apps) {
      const good = Object.keys(config.apps).filter((name) => apps!.manifests.has(name));
      const entries = good.map((name) => (config.apps as Record<string, unknown>)[name] as Obj);
      applied.apps = await applyKeyed(tx, project.id, tables.apps!, good, entries, force, apps.failed);
      for (const name of good) {
        await tx`update apps set manifest = ${tx.json(apps.manifests.get(name) as never)}, manifest_fetched_at = now() where project_id = ${project.id} and key = ${name}`;
      }
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
      // As text into a json column: the document keeps its key order (a jsonb parameter would sort it).
      await tx`insert into design_tokens (project_id, document) values (${project.id}, ${JSON.stringify(config.designTokens)}::text::json)
               on conflict (project_id) do update set document = excluded.document, updated_at = now()`;
      applied.designTokens = 1;
    }
    if (config.apiKeys) {
      const pushed = (input as Obj).apiKeys as Obj[];
      const pathOf = (name: string) => `apiKeys[${pushed.findIndex((k) => k?.name === name)}]`;
      applied.apiKeys = await applyApiKeys(
        announcer,
        tx,
        project.id,
        tenantId,
        config.apiKeys as unknown as Obj[],
        force,
        newKeys,
        atomic ? null : { list: entryErrors, pathOf },
      );
    }
    // NOTIFY inside the transaction: PostgreSQL delivers it to other processes only on commit.
    await svc.bus.stage(
      (text, params) => tx.unsafe(text, params as never[]) as unknown as Promise<unknown[]>,
      keyEvents,
    );
    // Snapshots carry operations (execute<Op> fields) and hooks (queued by record writes).
    // …and segments (targeting evaluates them per read).
    if (cfg.operations || cfg.hooks || cfg.segments) projectChanged = true;
    // Apps, placements and design tokens are read by GraphQL: their cached answers must go.
    if (cfg.apps || cfg.placements || cfg.designTokens) projectChanged = true;
    return { schemaVersion, projectChanged };
  });
  svc.bus.deliverLocal(keyEvents);
  if (outcome.schemaVersion !== null) await announceSchema(svc.bus, project.id, outcome.schemaVersion);
  if (outcome.projectChanged) await svc.bus.publish({ type: 'project.changed', projectId: project.id });
  if (svc.documents) {
    // Validated against the schema this push left, so they come after it.
    if (outcome.schemaVersion !== null) entryErrors.push(...(await svc.documents.revalidate(project.id)));
    if (cfg.documents !== undefined) {
      const pushed = await svc.documents.push(project.id, cfg.documents, force);
      applied.documents = pushed.applied.documents;
      entryErrors.push(...pushed.errors);
    }
  }
  return {
    projectId: project.id,
    applied,
    errors: entryErrors,
    warnings: validated.warnings,
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
async function applyApiKeys(
  announcer: KeyAnnouncer,
  tx: Sql,
  projectId: string,
  tenantId: string,
  entries: Obj[],
  force: boolean,
  out: { name: string; envVar: string; key: string }[],
  errors: { list: ConfigError[]; pathOf: (name: string) => string } | null,
): Promise<number> {
  let applied = 0;
  for (const e of entries) {
    const one = (t: Sql) => applyApiKey(announcer, t, projectId, tenantId, e, force, out);
    if (!errors) {
      await one(tx);
      applied++;
      continue;
    }
    // Not atomic: a key refused at creation is skipped, its rotation undone by the savepoint.
    try {
      await (tx as unknown as { savepoint<T>(fn: (sp: Sql) => Promise<T>): Promise<T> }).savepoint((sp) => one(sp));
      applied++;
    } catch (err) {
      if (!(err instanceof BadUserInput)) throw err;
      errors.list.push({ path: errors.pathOf(String(e.name)), message: err.message });
    }
  }
  return applied;
}

async function applyApiKey(
  announcer: KeyAnnouncer,
  tx: Sql,
  projectId: string,
  tenantId: string,
  e: Obj,
  force: boolean,
  out: { name: string; envVar: string; key: string }[],
): Promise<void> {
  const name = String(e.name);
  const [have] = await tx<{ api_key_id: string; definition: Obj; deleted: boolean }[]>`
    select c.api_key_id, c.definition, (k.deleted_at is not null) as deleted
    from config_api_keys c join api_keys k on k.id = c.api_key_id
    where c.project_id = ${projectId} and c.name = ${name}`;
  if (have && !have.deleted && !force && keyShape(have.definition) === keyShape(e)) {
    await tx`update config_api_keys set definition = ${tx.json(e as never)} where project_id = ${projectId} and name = ${name}`;
    // The document policy is a setting, not a grant: it changes in place, announced with the commit.
    const documents = (e.documents as string | undefined) ?? null;
    const changed =
      await tx`update api_keys set documents = ${documents} where id = ${have.api_key_id} and documents is distinct from ${documents} returning id`;
    if (changed.length) await announcer.publish({ type: 'key.changed', keyId: have.api_key_id, keyHash: null });
    return;
  }
  if (have && !have.deleted) await deleteApiKey(tx, announcer, tenantId, have.api_key_id);
  const kind = e.keyType === 'secret' ? 'sk' : 'pk';
  let created: { id: string; key: string };
  try {
    created = await createApiKey(tx, announcer, {
      tenantId,
      kind,
      projectId,
      name,
      scopes: (e.scopes as string[] | undefined) ?? ['records:read'],
      allowedModels: e.allowedModels ?? null,
      documents: e.documents ?? null,
    });
  } catch (err) {
    // Only our own validation errors are the client's; a driver error stays a masked fault.
    if (err instanceof SvcError && err.status < 500) throw new BadUserInput(`apiKeys "${name}": ${err.message}`);
    throw err;
  }
  if (Array.isArray(e.allowedFileTypes)) {
    await tx`update api_keys set allowed_file_types = ${e.allowedFileTypes as string[]} where id = ${created.id} and project_id = ${projectId}`;
  }
  await tx`insert into config_api_keys (project_id, name, api_key_id, definition) values (${projectId}, ${name}, ${created.id}, ${tx.json(e as never)})
           on conflict (project_id, name) do update set api_key_id = excluded.api_key_id, definition = excluded.definition`;
  out.push({ name, envVar: String(e.envVar), key: created.key });
}
