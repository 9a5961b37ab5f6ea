import type { Sql } from '../store/db.ts';
import type { ModelDef } from '../projects/types.ts';
import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import type { Gate } from '../auth/gate.ts';
import { hasScope } from '../auth/scopes.ts';
import { verifyTokenAlone, type VerifyToken } from '../identity/token-only.ts';
import type { JoinAuth, Joiner } from './gateway.ts';
import { customerPrincipals, keyAccess, type Access } from './access.ts';
import { keyPrincipals } from '../content/field-access.ts';

/**
 * Who joins a room (CONTRACT §10): `apiKey` (plus `projectId` for tenant keys) and/or `token`, a
 * customer access token, in the query, as browsers cannot set headers on a WebSocket. With a key
 * the gate decides as on every surface (origin rules, rate limit; a token beside the key is
 * verified for the key's project). The spec's room URL carries a token alone: the project is
 * then the token's audience, and the token is verified for it (signature, expiry, revocation).
 */
export interface JoinAuthDeps {
  sql: Sql;
  gate: Gate;
  /** Customer access token → customer, for a project (src/identity). */
  verifyToken: VerifyToken;
}

export function joinAuth(deps: JoinAuthDeps): JoinAuth {
  return async (req, url) => {
    const params = url.searchParams;
    const token = params.get('token');
    if (token && !params.get('apiKey') && !req.headers.get('x-api-key')) {
      return customerJoiner(deps, null, await verifyTokenAlone(deps.verifyToken, token));
    }
    const { key, customer } = await deps.gate.admit({ headers: req.headers, params });
    if (customer) return customerJoiner(deps, key, customer);
    const principals = keyPrincipals(key);
    return {
      identity: `key:${key.keyId}`,
      userId: key.keyId,
      projectId: key.projectId,
      access: (model) => {
        const mode = keyAccess(key, model);
        return mode && { mode, principals };
      },
    };
  };
}

/**
 * A customer writes a record when their token's scopes (or the key it came with) cover
 * `records:write:<model>`, or when the record is their own (`records.owner_customer_id`: the
 * `self` principal). Reading (awareness only) follows the key rule: records:read, plus drafts:read on
 * versioned models.
 */
function customerJoiner(deps: JoinAuthDeps, key: KeyPrincipal | null, c: CustomerPrincipal): Joiner {
  return {
    identity: `customer:${c.customerId}`,
    userId: c.customerId,
    projectId: c.projectId,
    async access(model: ModelDef, recordId: string): Promise<Access | null> {
      const [own] =
        await deps.sql`select 1 from records where project_id = ${c.projectId} and id = ${recordId} and owner_customer_id = ${c.customerId}`;
      const principals = customerPrincipals(key, own !== undefined);
      const viaKey = key ? keyAccess(key, model) : null;
      if (viaKey === 'write' || hasScope(c.scopes, `records:write:${model.key}`) || own)
        return { mode: 'write', principals };
      if (
        viaKey === 'read' ||
        (hasScope(c.scopes, `records:read:${model.key}`) &&
          (model.versioned === false || hasScope(c.scopes, 'drafts:read')))
      )
        return { mode: 'read', principals };
      return null;
    },
  };
}
