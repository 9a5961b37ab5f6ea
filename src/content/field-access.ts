import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import { isPublicKey } from '../auth/principal.ts';
import { PermissionDenied } from '../errors.ts';
import type { FieldDef, ModelDef, Principal } from '../projects/types.ts';

/**
 * Field `access` rules (spec "Field definition"). `access.write` / `access.read` are allow-lists
 * of principals: `public`, `self`, `scoped`, `service`, `admin`. A request maps to principals:
 *
 * | caller                                              | principals |
 * |-----------------------------------------------------|------------|
 * | secret API key (`sk_`, `sk_t_`), no customer token  | `service`  |
 * | public key (`pk_`, `pk_t_`), no customer token      | `public`   |
 * | customer token, the record is the customer's own    | `self`     |  (customer-auth issue)
 * | customer token with per-model scoped permissions    | `scoped`   |  (customer-auth issue)
 * | a member's Studio session, control-key record writes | `admin`    |
 *
 * The CLI's `svc records save` acts with a secret key, so it is `service`. Customer tokens do
 * not exist yet: the customer-auth issue extends `writerPrincipals`/`readerPrincipals` (the
 * `target` argument exists so `self` can compare the record's owner with the customer).
 */
const SERVICE: ReadonlySet<Principal> = new Set(['service']);
const PUBLIC: ReadonlySet<Principal> = new Set(['public']);
const ADMIN: ReadonlySet<Principal> = new Set(['admin']);

/** Who a request is, as these rules need it (GraphQL's context is one; so are collab rooms). */
export interface AccessCaller {
  principal: KeyPrincipal;
  customer: CustomerPrincipal | null;
}

/** The principals of an API key alone (no customer token); a member session is `admin`. */
export function keyPrincipals(key: Pick<KeyPrincipal, 'kind' | 'member'>): ReadonlySet<Principal> {
  if (key.member) return ADMIN;
  return isPublicKey(key.kind) ? PUBLIC : SERVICE;
}

/** The record a write goes to: null `recordId` for a create. */
export interface WriteTarget {
  recordId: string | null;
  /** The record is (or, for a create, will be) owned by the customer of the token. */
  ownedByCaller?: boolean;
}

/**
 * A customer token adds `scoped` (the customer acts through stamped scopes) and, on the
 * customer's own records and on creates (which the customer will own), `self`.
 */
export function writerPrincipals(ctx: AccessCaller, target?: WriteTarget): ReadonlySet<Principal> {
  const base = keyPrincipals(ctx.principal);
  if (!ctx.customer) return base;
  const out = new Set<Principal>(base);
  out.add('scoped');
  if (target && (target.recordId === null || target.ownedByCaller)) out.add('self');
  return out;
}

/** Who reads. Schemas are built per key fingerprint (which includes the key kind), so reads are pruned at build time. */
export function readerPrincipals(key: Pick<KeyPrincipal, 'kind'>): ReadonlySet<Principal> {
  return keyPrincipals(key);
}

const PUBLIC_SCOPED: ReadonlySet<Principal> = new Set(['public', 'scoped']);
const SERVICE_SCOPED: ReadonlySet<Principal> = new Set(['service', 'scoped']);

/**
 * Who reads, per request: the key's principal, plus `scoped` with a customer token. `self`
 * is decided per record (the record's owner is the token's customer): see `customerMayRead`.
 */
export function requestReaders(ctx: AccessCaller): ReadonlySet<Principal> {
  if (!ctx.customer) return keyPrincipals(ctx.principal);
  return isPublicKey(ctx.principal.kind) ? PUBLIC_SCOPED : SERVICE_SCOPED;
}

const rowMemo = new WeakMap<readonly ModelDef[], Map<ReadonlySet<Principal>, { owned: string[]; closed: string[] }>>();

/**
 * Model `access.read` for these readers: models whose records they may read only when they
 * own them (`self` listed), and models they may not read at all. Both empty for almost every
 * project; memoised per model list (one per snapshot) and reader set.
 */
export function modelRowAccess(
  models: readonly ModelDef[],
  readers: ReadonlySet<Principal>,
): { owned: string[]; closed: string[] } {
  let bySet = rowMemo.get(models);
  if (!bySet) rowMemo.set(models, (bySet = new Map()));
  let out = bySet.get(readers);
  if (!out) {
    out = { owned: [], closed: [] };
    for (const m of models) {
      const list = m.access?.read;
      if (!list || allows(list, readers)) continue;
      (list.includes('self') ? out.owned : out.closed).push(m.key);
    }
    bySet.set(readers, out);
  }
  return out;
}

/**
 * Whether the request may read a field its schema's key principal may not: a customer token
 * reads fields listing `scoped`, and fields listing `self` of the records they own.
 */
export function customerMayRead(
  f: FieldDef,
  ctx: Pick<AccessCaller, 'customer'>,
  owner: string | null | undefined,
): boolean {
  if (!ctx.customer) return false;
  const list = f.access?.read;
  if (!list) return true;
  return list.includes('scoped') || (list.includes('self') && owner === ctx.customer.customerId);
}

/** Fields a customer could read that the key alone cannot (they resolve per record). */
export function customerReadable(f: FieldDef, key: ReadonlySet<Principal>): boolean {
  const list = f.access?.read;
  return !!list && !allows(list, key) && (list.includes('self') || list.includes('scoped'));
}

function allows(list: readonly Principal[] | undefined, who: ReadonlySet<Principal>): boolean {
  return list === undefined || list.some((p) => who.has(p));
}

export function canRead(f: FieldDef, who: ReadonlySet<Principal>): boolean {
  return allows(f.access?.read, who);
}

export function canWrite(f: FieldDef, who: ReadonlySet<Principal>): boolean {
  return allows(f.access?.write, who);
}

/**
 * Fails the whole write (nothing is changed: call it before or inside the write transaction)
 * when `data` sets a field whose `access.write` excludes every principal of the caller.
 * Setting a field to null is setting it. Defaults the server applies are not the caller's.
 */
export function checkFieldWrites(ctx: AccessCaller, model: ModelDef, data: unknown, target: WriteTarget): void {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return;
  let who: ReadonlySet<Principal> | undefined;
  for (const f of model.fields) {
    if (!f.access?.write || (data as Record<string, unknown>)[f.key] === undefined) continue;
    who ??= writerPrincipals(ctx, target);
    if (!canWrite(f, who)) throw new PermissionDenied('Insufficient permissions', { field: f.key });
  }
}

/** Top-level fields of `model` that this request may not read on this record (content masking). */
export function hiddenFor(
  model: ModelDef,
  key: ReadonlySet<Principal>,
  ctx: Pick<AccessCaller, 'customer'>,
  owner: string | null | undefined,
): string[] {
  return model.fields.filter((f) => !canRead(f, key) && !customerMayRead(f, ctx, owner)).map((f) => f.key);
}

/** Top-level fields of `model` that `who` may not read (empty for almost every model). */
export function hiddenFields(model: ModelDef, who: ReadonlySet<Principal>): string[] {
  return model.fields.filter((f) => !canRead(f, who)).map((f) => f.key);
}

/** A copy of record content without the hidden keys (the `content` JSON and version history). */
export function maskContent(content: unknown, hidden: readonly string[]): unknown {
  if (hidden.length === 0 || typeof content !== 'object' || content === null || Array.isArray(content)) return content;
  const out = { ...(content as Record<string, unknown>) };
  for (const k of hidden) delete out[k];
  return out;
}
