import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { BadUserInput, NotFound, PermissionDenied } from '../errors.ts';
import type { KeyKind } from '../auth/principal.ts';
import {
  createApiKey,
  deleteApiKey,
  getApiKey,
  listApiKeys,
  updateApiKey,
  type KeySummary,
  type KeyUpdate,
} from '../auth/api-keys.ts';
import type { ControlCaller } from './credentials.ts';
import { memberMay, projectOfCaller, requireMember } from './tenancy.ts';

/**
 * API keys on the control plane: who may manage which key. Owners and admins hold
 * `keys:write`; a project admin manages the keys bound to that project, while tenant keys
 * (which span projects) need a tenant-wide owner or admin.
 */
const DENIED = 'Only owners and admins may manage API keys (tenant keys need a tenant-wide owner or admin)';

function kindOf(type: unknown, tenant: unknown): KeyKind {
  if (type !== 'public' && type !== 'secret') throw new BadUserInput('type must be public or secret');
  const t = tenant === true;
  if (tenant !== undefined && tenant !== null && typeof tenant !== 'boolean')
    throw new BadUserInput('tenant must be true or false');
  return `${type === 'public' ? 'pk' : 'sk'}${t ? '_t' : ''}` as KeyKind;
}

export async function controlCreateKey(
  sql: Sql,
  bus: EventBus,
  caller: ControlCaller,
  body: Record<string, unknown>,
): Promise<{ id: string; key: string }> {
  const member = requireMember(caller);
  const kind = kindOf(body.type, body.tenant);
  const tenant = kind === 'pk_t' || kind === 'sk_t';
  const projectId = typeof body.project === 'string' && body.project !== '' ? body.project : null;
  if (!memberMay(member, 'keys:write', tenant ? null : projectId)) throw new PermissionDenied(DENIED);
  return createApiKey(sql, bus, {
    tenantId: member.tenantId,
    kind,
    name: body.name,
    scopes: body.scopes,
    projectId: tenant ? (projectId ?? undefined) : projectId,
    projectIds: body.projects ?? undefined,
    allowedModels: body.models ?? undefined,
    allowedOrigins: body.origins ?? undefined,
    rateLimit: body.rateLimit ?? undefined,
    expiresAt: body.expiresAt ?? undefined,
    documents: body.documents ?? undefined,
  });
}

export async function controlListKeys(
  sql: Sql,
  caller: ControlCaller,
  project: unknown,
): Promise<{ keys: KeySummary[] }> {
  const member = requireMember(caller);
  // A project-scoped admin only ever sees the keys serving their project.
  const projectId =
    typeof project === 'string' && project !== '' ? (await projectOfCaller(sql, member, project)).id : member.projectId;
  if (!memberMay(member, 'keys:write', projectId)) throw new PermissionDenied(DENIED);
  return { keys: await listApiKeys(sql, member.tenantId, projectId) };
}

async function manageable(
  sql: Sql,
  caller: ControlCaller,
  keyId: string,
): Promise<{ tenantId: string; key: KeySummary }> {
  const member = requireMember(caller);
  const key = await getApiKey(sql, member.tenantId, keyId);
  if (!memberMay(member, 'keys:write', key.projectId)) {
    if (member.projectId !== null && key.projectId !== member.projectId) throw new NotFound('API key not found');
    throw new PermissionDenied(DENIED);
  }
  return { tenantId: member.tenantId, key };
}

export async function controlUpdateKey(
  sql: Sql,
  bus: EventBus,
  caller: ControlCaller,
  keyId: string,
  body: Record<string, unknown>,
): Promise<KeySummary> {
  const { tenantId } = await manageable(sql, caller, keyId);
  for (const k of ['scopes', 'models', 'projects', 'type', 'tenant', 'project']) {
    if (body[k] !== undefined)
      throw new BadUserInput(`${k} is fixed at creation: create a new key and rotate (docs/keys.md)`);
  }
  const patch: KeyUpdate = {
    name: body.name,
    allowedOrigins: body.origins,
    rateLimit: body.rateLimit,
    expiresAt: body.expiresAt,
    disabled: body.disabled,
    documents: body.documents,
  };
  return updateApiKey(sql, bus, tenantId, keyId, patch);
}

export async function controlDeleteKey(
  sql: Sql,
  bus: EventBus,
  caller: ControlCaller,
  keyId: string,
): Promise<{ id: string; deleted: true }> {
  const { tenantId } = await manageable(sql, caller, keyId);
  return deleteApiKey(sql, bus, tenantId, keyId);
}
