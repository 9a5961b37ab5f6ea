import type { Gate } from '../auth/gate.ts';
import type { GraphqlDeps } from '../graphql/context.ts';
import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import { hasScope } from '../auth/scopes.ts';
import { NotFound, PermissionDenied } from '../errors.ts';
import { verifyTokenAlone, type VerifyToken } from '../identity/token-only.ts';
import type { Channel } from './protocol/channels.ts';
import { keyPrincipals, modelRowAccess, requestReaders } from '../content/field-access.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
import type { Client } from './hub.ts';

/** What realtime needs from the process: the gate, and what GraphQL needs (subscriptions). */
export type RealtimeDeps = GraphqlDeps & { gate: Gate };

/**
 * Who a realtime connection is (CONTRACT §10): a key from `apiKey` (plus `projectId` for tenant
 * keys) through the one gate, with a customer from `token` beside it, or on `/sse` and `/_events`
 * a customer `token` alone (the project is its audience: src/identity/token-only.ts, shared with
 * collaboration rooms). Query parameters, since browsers cannot set headers on EventSource and
 * WebSocket, or the equivalent headers. The credentials are kept so a key change or a session
 * revocation can re-check them while the connection lives.
 */
export interface RealtimeCredentials {
  headers: Record<string, string>;
  params: Record<string, string>;
}

export interface RealtimeIdentity {
  /** Null for a token-only connection: the token's scopes then decide. */
  key: KeyPrincipal | null;
  customer: CustomerPrincipal | null;
  /** The project the connection acts on (the key's, or the token's audience). */
  projectId: string;
  credentials: RealtimeCredentials;
}

/** An identity that came with a key (graphql-ws always needs one: the schema is the key's). */
export interface KeyedIdentity extends RealtimeIdentity {
  key: KeyPrincipal;
}

const HEADERS = ['x-api-key', 'x-project-id', 'authorization', 'origin', 'sec-fetch-site', 'cookie'];
const PARAMS = ['apiKey', 'projectId', 'token', 'csrf'];

/** The credentials of a gateway request (query parameters and the headers the gate reads). */
export function credentialsOf(req: Request, url: URL): RealtimeCredentials {
  const headers: Record<string, string> = {};
  const params: Record<string, string> = {};
  for (const h of HEADERS) {
    const v = req.headers.get(h);
    if (v !== null) headers[h] = v;
  }
  for (const p of PARAMS) {
    const v = url.searchParams.get(p);
    if (v !== null) params[p] = v;
  }
  return { headers, params };
}

/** A key through the gate, with the customer of a token beside it. */
export async function authenticateRealtime(
  svc: { gate: Gate },
  credentials: RealtimeCredentials,
): Promise<KeyedIdentity> {
  const { key, customer } = await svc.gate.authenticate(credentials);
  return { key, customer, projectId: key.projectId, credentials };
}

/**
 * `/sse/{channel}` and `/_events`: `token` with no key is a customer on their own (verified for
 * the token's audience: signature, expiry, revocation); anything else goes through the gate.
 */
export async function authenticateGateway(
  svc: { gate: Gate },
  verifyToken: VerifyToken,
  credentials: RealtimeCredentials,
): Promise<RealtimeIdentity> {
  const token = credentials.params.token;
  if (token && !credentials.params.apiKey && !credentials.headers['x-api-key']) {
    const customer = await verifyTokenAlone(verifyToken, token);
    return { key: null, customer, projectId: customer.projectId, credentials };
  }
  return authenticateRealtime(svc, credentials);
}

/** Per-identity caps count customers apart from the key they share. */
export function identityOf(who: RealtimeIdentity): string {
  if (who.customer) return `customer:${who.projectId}:${who.customer.customerId}`;
  return `key:${who.key!.keyId}`;
}

/** Whether an execution id names one of this project's executions (another project's reads as unknown). */
export async function executionInProject(
  svc: Pick<RealtimeDeps, 'sql'>,
  projectId: string,
  executionId: string,
): Promise<{ createdBy: string | null } | null> {
  const [row] = await svc.sql<
    { created_by: string | null }[]
  >`select created_by from operation_executions where id = ${executionId} and project_id = ${projectId}`;
  return row ? { createdBy: row.created_by } : null;
}

const denied = (scope: string) => new PermissionDenied(`missing required scope: ${scope}`);

/**
 * Models whose records this identity may not all read (model `access.read`: owner-only or
 * closed). Change events carry record ids and writers for every record of a model, so such a
 * model's channel is refused (and `changes:*` leaves it out) rather than leak other customers'
 * records; owners hear about their own records through notifications.
 */
export function restrictedModels(snapshot: ProjectSnapshot, who: Pick<RealtimeIdentity, 'key' | 'customer'>): string[] {
  const readers = who.key
    ? requestReaders({ principal: who.key, customer: who.customer })
    : new Set([...keyPrincipals({ kind: 'pk' }), 'scoped' as const]);
  const r = modelRowAccess(snapshot.models, readers);
  return r.owned.length || r.closed.length ? [...r.owned, ...r.closed] : [];
}

/**
 * What `changes:*` carries for a holder (spec: "changes:* covers every model", read as: every
 * model the holder may read). Null: every model, present and future (records:read, no model
 * allow-list, no model it may not wholly read). Otherwise the set of models it may read
 * (per-model scopes such as a role's or `self:*`, a model allow-list, owner-only models left
 * out), fixed when it subscribes. Throws when that set is empty.
 */
export function wildcardModels(
  snapshot: ProjectSnapshot,
  who: Pick<RealtimeIdentity, 'key' | 'customer'>,
): ReadonlySet<string> | null {
  const holder = who.key ?? who.customer!.scopes;
  const allowedModels = who.key?.allowedModels ?? null;
  const restricted = restrictedModels(snapshot, who);
  if (!allowedModels && restricted.length === 0 && hasScope(holder, 'records:read')) return null;
  const out = new Set<string>();
  for (const m of snapshot.models) {
    if (allowedModels && !allowedModels.includes(m.key)) continue;
    if (restricted.includes(m.key) || !hasScope(holder, `records:read:${m.key}`)) continue;
    out.add(m.key);
  }
  if (out.size === 0) throw denied('records:read');
  return out;
}

/**
 * Whether an identity may subscribe to a channel of its project. Throws NotFound for a channel
 * that names nothing in the project, PermissionDenied (with the spec's scope message) otherwise.
 * For `changes:*`, answers the models it carries for this identity (null: all).
 */
export async function authorizeChannel(
  svc: RealtimeDeps,
  who: RealtimeIdentity,
  channel: Channel,
): Promise<ReadonlySet<string> | null> {
  const key = who.key;
  // With a key its scopes decide; a token alone brings the scopes stamped into it (`scope`).
  const holder = key ?? who.customer!.scopes;
  const allowedModels = key?.allowedModels ?? null;
  if (channel.kind === 'changes') {
    const snapshot = (await svc.projects.get(who.projectId)).snapshot;
    if (channel.modelKey === '*') return wildcardModels(snapshot, who);
    const restricted = restrictedModels(snapshot, who);
    if (!snapshot.models.some((m) => m.key === channel.modelKey))
      throw new NotFound(`Unknown channel: no model "${channel.modelKey}"`);
    if (restricted.includes(channel.modelKey)) throw new PermissionDenied('Insufficient permissions');
    if (allowedModels && !allowedModels.includes(channel.modelKey)) throw denied(`records:read:${channel.modelKey}`);
    if (!hasScope(holder, `records:read:${channel.modelKey}`)) throw denied(`records:read:${channel.modelKey}`);
    return null;
  }
  if (channel.kind === 'jobs') {
    const mayReadAll = hasScope(holder, 'operations:read');
    // Without operations:read, a customer follows the executions they ran (jobs:* stays closed).
    if (!mayReadAll && (!who.customer || channel.executionId === '*')) throw denied('operations:read');
    if (channel.executionId === '*') return null;
    const execution = await executionInProject(svc, who.projectId, channel.executionId);
    if (!mayReadAll && execution?.createdBy !== who.customer!.customerId) throw denied('operations:read');
    if (!execution) throw new NotFound(`Unknown channel: no execution "${channel.executionId}" in this project`);
    return null;
  }
  if (!who.customer || who.customer.customerId !== channel.customerId)
    throw new PermissionDenied('A customer may subscribe only to their own notifications');
  if (!hasScope(holder, 'notifications:read')) throw denied('notifications:read');
  return null;
}

/** Re-checks stored credentials (a key.changed or a revocation arrived): false when they fail. */
export async function stillValid(
  svc: { gate: Gate },
  who: RealtimeIdentity,
  verifyToken?: VerifyToken,
): Promise<boolean> {
  try {
    if (!who.key) {
      if (!verifyToken) return false;
      const again = await authenticateGateway(svc, verifyToken, who.credentials);
      return again.customer?.sessionId === who.customer?.sessionId && again.projectId === who.projectId;
    }
    const again = await authenticateRealtime(svc, who.credentials);
    return again.key.keyId === who.key.keyId && again.key.fingerprint === who.key.fingerprint;
  } catch {
    return false;
  }
}

/**
 * What the hub (hub.ts) knows of a client: who it counts as (per-identity caps, revocations)
 * and how its credentials are checked again. The transport adds how to close and tell it.
 */
export function hubIdentity(
  svc: { gate: Gate },
  who: RealtimeIdentity,
  verifyToken?: VerifyToken,
): Pick<Client, 'identity' | 'keyId' | 'customerId' | 'sessionId' | 'recheck'> {
  return {
    identity: identityOf(who),
    keyId: who.key?.keyId ?? null,
    customerId: who.customer?.customerId ?? null,
    sessionId: who.customer?.sessionId ?? null,
    recheck: () => stillValid(svc, who, verifyToken),
  };
}
