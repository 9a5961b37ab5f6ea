import type { KeyPrincipal } from '../auth/principal.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import type { Sql } from '../store/db.ts';
import { keyAccess, unreadableFields } from './access.ts';
import { keyPrincipals } from '../content/field-access.ts';
import { DEFAULT_VARIANT, parseRoomName } from './protocol.ts';
import { recordExists } from './store.ts';

/**
 * `GET /collab/info?recordId&modelKey` (spec): where and how to join a record's room. `enabled`
 * says whether this key may join it (write access); `readOnly` that it may join only read-only,
 * asking with `readOnly=1` (a join without write access is otherwise 403); `auth.params` names the
 * query parameters the gateway accepts (CONTRACT §10).
 */
export interface CollabInfo {
  enabled: boolean;
  /** True when this key may join only read-only (`enabled` false): the join must ask with `readOnly=1`. */
  readOnly: boolean;
  wsUrl: string;
  roomName: string;
  auth: { method: 'query-param'; params: string };
}

export const AUTH_PARAMS = 'token,apiKey';

export async function collabInfo(
  sql: Sql,
  realtimeUrl: string,
  principal: KeyPrincipal,
  snapshot: ProjectSnapshot,
  query: Record<string, string | undefined>,
): Promise<CollabInfo> {
  const { recordId, modelKey } = query;
  if (!recordId || !modelKey) throw new BadUserInput('recordId and modelKey are required');
  const roomName = `${modelKey}:${recordId}:${DEFAULT_VARIANT}`;
  if (!parseRoomName(roomName)) throw new BadUserInput('recordId or modelKey is not valid');
  const model = snapshot.models.find((m) => m.key === modelKey);
  const visible = model && (!principal.allowedModels || principal.allowedModels.includes(model.key));
  if (!model || !visible || !(await recordExists(sql, snapshot.id, model.key, recordId)))
    throw new NotFound(`No ${modelKey} record with _id "${recordId}"`);
  const mode = keyAccess(principal, model);
  const joinable = mode !== null && unreadableFields(model, keyPrincipals(principal)).length === 0;
  // `enabled` is the spec's join (write access); read-only presence is the readOnly=1 opt-in.
  return {
    enabled: joinable && mode === 'write',
    readOnly: joinable && mode === 'read',
    wsUrl: realtimeUrl,
    roomName,
    auth: { method: 'query-param', params: AUTH_PARAMS },
  };
}
