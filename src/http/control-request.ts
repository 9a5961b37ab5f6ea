import type { Service } from '../service.ts';
import { authenticateControl, type ControlCaller } from '../control/credentials.ts';
import { BadUserInput } from '../errors.ts';

/** What every control-plane route needs from a request: who calls, and its JSON object body. */
export function controlCaller(svc: Service, headers: Record<string, string | undefined>): Promise<ControlCaller> {
  return authenticateControl(svc.sql, svc.rootTokenHash, headers.authorization);
}

export function objectBody(b: unknown): Record<string, unknown> {
  if (b === undefined || b === null || b === '') return {};
  if (typeof b !== 'object' || Array.isArray(b)) throw new BadUserInput('The request body must be a JSON object');
  return b as Record<string, unknown>;
}
