import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import { csrfToken, request } from '../api.ts';

/**
 * Joins a record's room the documented way (docs/collab.md): `GET /collab/info`, then
 * y-websocket's WebsocketProvider on `wsUrl`/`roomName`. The session cookie authenticates the
 * upgrade; its CSRF token and the project go as query parameters (a browser WebSocket carries
 * no custom headers).
 */
export interface CollabInfo {
  enabled: boolean;
  readOnly?: boolean;
  wsUrl: string;
  roomName: string;
}

export interface Room {
  doc: Y.Doc;
  provider: WebsocketProvider;
  content: Y.Map<unknown>;
  info: CollabInfo;
  destroy(): void;
}

const COLORS = ['#d9480f', '#2b8a3e', '#1864ab', '#862e9c', '#c2255c', '#0b7285', '#5f3dc4', '#e67700'];
export const colorOf = (s: string): string =>
  COLORS[[...s].reduce((n, c) => (n * 31 + c.charCodeAt(0)) >>> 0, 7) % COLORS.length]!;

export async function joinRoom(
  projectId: string,
  modelKey: string,
  recordId: string,
  locale: string | null,
  user: { name: string; canWrite: boolean },
): Promise<Room> {
  const q = new URLSearchParams({ recordId, modelKey });
  const info = await request<CollabInfo>('GET', `/collab/info?${q}`, undefined, projectId);
  // Viewers may join read-only only (`readOnly`); editors get `enabled`.
  if (!info.enabled && !(info.readOnly && !user.canWrite)) throw new Error('You may not open this record’s room');
  // The variant of a room is its locale; `default` is the project's default locale.
  const roomName = locale ? info.roomName.replace(/:[^:]+$/, `:${locale}`) : info.roomName;
  const doc = new Y.Doc();
  // A member who may not write joins read-only, which the room asks for explicitly (else 403).
  const params: Record<string, string> = { projectId, csrf: csrfToken() };
  if (!user.canWrite) params.readOnly = '1';
  const provider = new WebsocketProvider(info.wsUrl, roomName, doc, { params, maxBackoffTime: 5000 });
  provider.awareness.setLocalStateField('user', {
    name: user.name,
    color: colorOf(user.name),
    canWrite: user.canWrite,
  });
  return {
    doc,
    provider,
    content: doc.getMap('content'),
    info: { ...info, roomName },
    destroy() {
      provider.awareness.setLocalState(null);
      provider.destroy();
      doc.destroy();
    },
  };
}
