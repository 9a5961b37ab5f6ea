import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { closeTokenService, tokenService, type TokenService } from './tokens.ts';
import type { MailDeps } from './mailer.ts';
import { CustomerProfiles } from './profiles.ts';

/**
 * The identity capability of one process: the token service (keys, revocation list) and what
 * the mailer needs. Started by the Service; GraphQL resolvers and routes find it by the bus
 * they already hold, so they need nothing else from the process.
 */
export interface Identity {
  sql: Sql;
  bus: EventBus;
  tokens: TokenService;
  mail: MailDeps;
  /** Customer profiles for targeting, cached per process (profiles.ts). */
  profiles: CustomerProfiles;
}

export interface IdentityStartDeps {
  sql: Sql;
  bus: EventBus;
  settings: { dataDir: string; baseUrl: string };
}

const byBus = new WeakMap<EventBus, Identity>();

export async function startIdentity(deps: IdentityStartDeps): Promise<Identity> {
  const tokens = tokenService(deps);
  await tokens.ready;
  const identity: Identity = {
    sql: deps.sql,
    bus: deps.bus,
    tokens,
    mail: { sql: deps.sql, settings: deps.settings },
    profiles: new CustomerProfiles(deps.sql, deps.bus),
  };
  byBus.set(deps.bus, identity);
  return identity;
}

export function identityOf(bus: EventBus): Identity {
  const id = byBus.get(bus);
  if (!id) throw new Error('identity is not started for this service');
  return id;
}

export function closeIdentity(bus: EventBus): void {
  byBus.get(bus)?.profiles.close();
  byBus.delete(bus);
  closeTokenService({ bus });
}
