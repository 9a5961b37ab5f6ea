import type { ContentSql, Sql } from '../store/db.ts';
import type { ActorRegistry } from '../actors/registry.ts';
import type { ProjectActor, ProjectSnapshot } from '../projects/actor.ts';
import type { ModelDef } from '../projects/types.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller, requireMember } from '../control/tenancy.ts';
import { BadUserInput, PermissionDenied } from '../errors.ts';
import { queueHooks } from './hooks.ts';
import { run } from './db.ts';
import { WriteTx, type WriteCommitter } from './tx.ts';
import { createRecord, publishRecord, updateRecord, type WriteContext, type WriteStep } from './write.ts';

/**
 * Record writes made by an admin member with a control key (`svc records save|publish` without
 * an API key, CONTRACT §3). Owners, admins and editors may write and publish; viewers may not.
 * The writer is the `admin` principal of field access rules, and the member id is the user the
 * record history names. They commit through the service's WriteCommitter like GraphQL writes:
 * events and queued hooks go with the commit, never before it.
 */
export interface MemberWriteDeps {
  sql: Sql;
  readSql: ContentSql;
  writes: WriteCommitter;
  projects: ActorRegistry<ProjectActor>;
}

async function writable(
  deps: MemberWriteDeps,
  caller: ControlCaller,
  projectId: string,
  modelKey: unknown,
): Promise<{ snapshot: ProjectSnapshot; model: ModelDef; memberId: string }> {
  const member = requireMember(caller);
  const p = await projectOfCaller(deps.sql, member, projectId);
  if (!memberMay(member, 'records:write', p.id))
    throw new PermissionDenied('This role may not write or publish records (viewers cannot)');
  const snapshot = (await deps.projects.get(p.id)).snapshot;
  if (typeof modelKey !== 'string' || modelKey === '') throw new BadUserInput('model is required', { field: 'model' });
  const model = snapshot.models.find((m) => m.key === modelKey);
  if (!model)
    throw new BadUserInput(`model "${modelKey.slice(0, 80)}" is not a model of this project`, { field: 'model' });
  return { snapshot, model, memberId: member.memberId };
}

/** Field `access.write` lists that leave out `admin` hold for members too. */
function checkAdminWrites(model: ModelDef, data: unknown): void {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return;
  for (const f of model.fields) {
    if (
      f.access?.write &&
      (data as Record<string, unknown>)[f.key] !== undefined &&
      !f.access.write.includes('admin')
    ) {
      throw new PermissionDenied('Insufficient permissions', { field: f.key });
    }
  }
}

function writeContext(snapshot: ProjectSnapshot, userId: string): WriteContext {
  const all = new Map(snapshot.models.map((m) => [m.key, m]));
  return { projectId: snapshot.id, defaultLocale: snapshot.defaultLocale, userId, models: (k) => all.get(k) };
}

/** One write, committed with the hooks it queues. */
async function commitOne(
  deps: MemberWriteDeps,
  snapshot: ProjectSnapshot,
  userId: string,
  step: WriteStep,
): Promise<void> {
  const tx = new WriteTx({ projectId: snapshot.id, userId }).write(step);
  queueHooks(tx, snapshot.id, snapshot.hooks, userId);
  await deps.writes.commit(tx);
}

/** Creates the record with this natural key, or updates its working version. */
export async function saveRecordAsMember(
  deps: MemberWriteDeps,
  caller: ControlCaller,
  projectId: string,
  input: Record<string, unknown>,
): Promise<{ _id: string; created: boolean }> {
  const { snapshot, model, memberId } = await writable(deps, caller, projectId, input.model);
  const naturalKey = input.naturalKey;
  if (typeof naturalKey !== 'string' || naturalKey === '' || naturalKey.length > 500) {
    throw new BadUserInput('naturalKey must be a non-empty string of at most 500 characters', { field: 'naturalKey' });
  }
  if (input.locale !== undefined && input.locale !== null && typeof input.locale !== 'string')
    throw new BadUserInput('locale must be a string', { field: 'locale' });
  const locale = (input.locale as string | null | undefined) ?? null;
  const data = input.data ?? {};
  checkAdminWrites(model, data);
  const w = writeContext(snapshot, memberId);
  // Found by natural key first; a record created in between makes the create a CONFLICT.
  const [found] = await run<{ id: string }>(
    deps.readSql,
    'select id from records where project_id = $1::text and model_key = $2::text and natural_key = $3::text',
    [snapshot.id, model.key, naturalKey],
  );
  if (found) {
    await commitOne(deps, snapshot, memberId, updateRecord(w, model, found.id, locale, data));
    return { _id: found.id, created: false };
  }
  const step = createRecord(w, model, { naturalKey, locale, data });
  await commitOne(deps, snapshot, memberId, step);
  return { _id: step.recordId, created: true };
}

export async function publishRecordAsMember(
  deps: MemberWriteDeps,
  caller: ControlCaller,
  projectId: string,
  recordId: string,
  input: Record<string, unknown>,
): Promise<{ _id: string; published: true }> {
  const { snapshot, model, memberId } = await writable(deps, caller, projectId, input.model);
  await commitOne(deps, snapshot, memberId, publishRecord(writeContext(snapshot, memberId), model, recordId));
  return { _id: recordId, published: true };
}
