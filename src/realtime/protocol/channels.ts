/**
 * Gateway channel names (spec "Gateway event channels"), parsed and validated; no I/O.
 * `changes:{modelKey}` / `changes:*`, `notifications:{customerId}`, `jobs:{executionId}` /
 * `jobs:*`. A name never crosses projects: the hub keys channels by project as well.
 */
export type Channel =
  | { kind: 'changes'; name: string; modelKey: string | '*' }
  | { kind: 'notifications'; name: string; customerId: string }
  | { kind: 'jobs'; name: string; executionId: string | '*' };

export const MAX_CHANNEL_LENGTH = 200;
const MODEL_KEY = /^[a-zA-Z][a-zA-Z0-9_]{0,63}$/;
const ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The channel a name denotes, or null when it names none. */
export function parseChannel(name: unknown): Channel | null {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_CHANNEL_LENGTH) return null;
  const colon = name.indexOf(':');
  if (colon < 0) return null;
  const prefix = name.slice(0, colon);
  const rest = name.slice(colon + 1);
  if (prefix === 'changes' && (rest === '*' || MODEL_KEY.test(rest))) return { kind: 'changes', name, modelKey: rest };
  if (prefix === 'notifications' && ID.test(rest)) return { kind: 'notifications', name, customerId: rest };
  if (prefix === 'jobs' && (rest === '*' || ID.test(rest))) return { kind: 'jobs', name, executionId: rest };
  return null;
}
