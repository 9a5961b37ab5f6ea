import type { Service } from '../service.ts';
import { authenticateControl, type ControlCaller } from '../control/credentials.ts';
import { BadUserInput } from '../errors.ts';
import { sessionCaller } from '../control/member-access.ts';

/**
 * What every control-plane route needs from a request: who calls, and its JSON object body.
 * `Authorization: Bearer` (root token, control key), or a member's Studio session cookie with
 * its CSRF token (the gate checks both); `X-Project-Id` picks the member row for a project.
 */
export async function controlCaller(svc: Service, headers: Record<string, string | undefined>): Promise<ControlCaller> {
  const caller = await resolveCaller(svc, headers);
  // Kept for the audit log, which records the change once it answered (src/http/audit.ts).
  callers.set(headers, caller);
  return caller;
}

async function resolveCaller(svc: Service, headers: Record<string, string | undefined>): Promise<ControlCaller> {
  if (!headers.authorization) {
    const session = svc.gate.sessionToken({ headers });
    if (session !== null) return sessionCaller(svc.sql, session, headers['x-project-id']?.trim() || null);
  }
  return authenticateControl(svc.sql, svc.rootTokenHash, headers.authorization);
}

/** The caller a request's route resolved, by the request's headers object (gone with the request). */
const callers = new WeakMap<object, ControlCaller>();
export const callerOf = (headers: object): ControlCaller | undefined => callers.get(headers);

export function objectBody(b: unknown): Record<string, unknown> {
  if (b === undefined || b === null || b === '') return {};
  if (typeof b !== 'object' || Array.isArray(b)) throw new BadUserInput('The request body must be a JSON object');
  return b as Record<string, unknown>;
}
