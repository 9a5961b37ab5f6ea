import type { KeyPrincipal } from '../auth/principal.ts';
import { hasScope } from '../auth/scopes.ts';
import type { ModelDef, Principal } from '../projects/types.ts';
import { canRead, canWrite, keyPrincipals } from '../content/field-access.ts';
import type { WriteRule } from './guard.ts';

/**
 * Who may do what in a room. The room shows the record's working version, so reading needs
 * drafts:read on versioned models; writing needs records:write on the model (or the record is the
 * customer's own). Inside the room the field `access` rules hold as in GraphQL (spec "Field
 * definition"): the joiner's principals are its key's (`service` for a secret key, `public` for a
 * public one) and, with a customer token, `scoped`, plus `self` on the customer's own record.
 */
export type Mode = 'write' | 'read';

export interface Access {
  mode: Mode;
  principals: ReadonlySet<Principal>;
}

/** What a key may do in a room of `model`. */
export function keyAccess(p: KeyPrincipal, model: ModelDef): Mode | null {
  if (p.allowedModels && !p.allowedModels.includes(model.key)) return null;
  if (hasScope(p, `records:write:${model.key}`)) return 'write';
  if (hasScope(p, `records:read:${model.key}`) && (model.versioned === false || hasScope(p, 'drafts:read')))
    return 'read';
  return null;
}

/**
 * A customer's principals. A token alone (the spec's room URL) stands for a customer of the
 * project's public site: `public`, as with the public key a site sends beside the token.
 */
export function customerPrincipals(
  key: Pick<KeyPrincipal, 'kind'> | null,
  ownsRecord: boolean,
): ReadonlySet<Principal> {
  const out = new Set<Principal>(key ? keyPrincipals(key) : ['public']);
  out.add('scoped');
  if (ownsRecord) out.add('self');
  return out;
}

/** Fields the joiner may not read: a room shares the whole document, so it cannot join. */
export function unreadableFields(model: ModelDef, who: ReadonlySet<Principal>): string[] {
  return model.fields.filter((f) => !canRead(f, who)).map((f) => f.key);
}

/** What a socket may change in the document (guard.ts). */
export function writeRule(model: ModelDef, access: Access): WriteRule {
  if (access.mode === 'read') return { all: true };
  const denied = new Set(model.fields.filter((f) => !canWrite(f, access.principals)).map((f) => f.key));
  return denied.size === 0 ? null : { all: false, denied };
}
