import type * as Y from 'yjs';
import type { ModelDef } from '../projects/types.ts';
import type { ModelLookup } from '../content/validate.ts';
import type { WriteRule } from './guard.ts';

/** What a room needs of a WebSocket (Bun's ServerWebSocket fits; tests may pass their own). */
export interface RoomSocket {
  send(data: Uint8Array): unknown;
  publish(topic: string, data: Uint8Array): unknown;
  subscribe(topic: string): void;
  unsubscribe(topic: string): void;
  close(code?: number, reason?: string): void;
}

export interface Conn {
  ws: RoomSocket;
  /** Who edits: the key id or the customer id; the autosave is attributed to the last one. */
  userId: string | null;
  /**
   * What the socket may change (guard.ts): null for every field; read-only joiners (awareness
   * only) nothing; others every field but those whose `access.write` leaves them out.
   */
  rule: WriteRule;
  /** Awareness client ids this socket announced, removed when it leaves. */
  awarenessIds: Set<number>;
}

/** What identifies a room and what the room needs to know about its record. */
export interface RoomInfo {
  /** `<projectId>/<roomName>`: unique across projects, the key of every table and topic. */
  key: string;
  projectId: string;
  model: ModelDef;
  recordId: string;
  locale: string;
  defaultLocale: string;
  models: ModelLookup;
}

/** Whether a transaction changed the document (Yjs emits 'update' on the same condition). */
export function changed(tr: Y.Transaction): boolean {
  if (tr.deleteSet.clients.size > 0) return true;
  for (const [client, clock] of tr.afterState) if (tr.beforeState.get(client) !== clock) return true;
  return false;
}

export function isConn(origin: unknown): origin is Conn {
  return typeof origin === 'object' && origin !== null && 'ws' in origin && 'awarenessIds' in origin;
}

export function logFailure(room: string, err: unknown): void {
  console.error(`collab room ${room}:`, err instanceof Error ? err.message : err);
}
