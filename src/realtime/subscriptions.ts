import { GraphQLError, type ExecutionArgs } from 'graphql';
import type { ServerOptions } from 'graphql-ws';
import type { ServerWebSocket } from 'bun';
import { PermissionDenied, SvcError, Unauthenticated } from '../errors.ts';
import { contextFor } from '../graphql/execute.ts';
import { prepareFor } from '../graphql/prepare.ts';
import { schemaOf, targetOf } from '../graphql/schema-entries.ts';
import { documentPolicyOf } from '../graphql/document-policy.ts';
import { maskErrors } from '../graphql/errors.ts';
import { checkVariables, LIMITS } from '../graphql/limits.ts';
import type { SubscriptionSource } from '../graphql/subscriptions.ts';
import { authenticateRealtime, hubIdentity, type KeyedIdentity, type RealtimeDeps } from './auth.ts';
import { TooManyConnections, type RealtimeHub } from './hub.ts';
import { parseChannel } from './protocol/channels.ts';
import { CloseCode } from './protocol/frames.ts';

/**
 * `/graphql/ws` (graphql-ws protocol, graphql-transport-ws) on graphql-ws's own server core:
 * this file only supplies its hooks. Connection params (CONTRACT §10): `apiKey`, optional
 * `authorization: "Bearer <token>"`, `projectId` for tenant keys. Each subscription is
 * validated against the key's pruned schema by the GraphQL core's prepare step and runs with
 * graphql-js `subscribe` over the hub's channel actors.
 */
export interface WsData {
  /** The upgrade request's browser markers (secret keys refuse browsers). */
  origin: string | null;
  secFetchSite: string | null;
  who?: KeyedIdentity;
  release?: () => void;
  /** Document bytes of this socket's live subscriptions, by id. */
  held?: Map<string, number>;
}

type Extra = { socket: ServerWebSocket<WsData> };

/** The hub as the Subscription resolvers' event source. */
export function hubSource(hub: RealtimeHub): SubscriptionSource {
  return {
    async listen(projectId, name, onEvent) {
      const channel = parseChannel(name);
      if (!channel) throw new Error(`not a channel: ${name}`);
      const actor = await hub.channel(projectId, channel);
      return actor.listen((frame) => onEvent(frame.data));
    },
  };
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

export function subscriptionServer(
  svc: RealtimeDeps,
  hub: RealtimeHub,
): ServerOptions<Record<string, unknown> | undefined, Extra> {
  const production = svc.settings.production;
  return {
    async onConnect(ctx) {
      const ws = ctx.extra.socket;
      const p = ctx.connectionParams ?? {};
      const headers: Record<string, string> = {};
      const apiKey = str(p.apiKey);
      const authorization = str(p.authorization);
      const projectId = str(p.projectId);
      if (apiKey) headers['x-api-key'] = apiKey;
      if (authorization) headers.authorization = authorization;
      if (projectId) headers['x-project-id'] = projectId;
      if (ws.data.origin) headers.origin = ws.data.origin;
      if (ws.data.secFetchSite) headers['sec-fetch-site'] = ws.data.secFetchSite;
      try {
        const who = await authenticateRealtime(svc, { headers, params: {} });
        ws.data.who = who;
        ws.data.release = hub.register({
          ...hubIdentity(svc, who),
          close: (code, reason) => ws.close(code, reason),
          // graphql-ws has no frame of its own for this; a ping (either side may send one, with
          // a payload) tells the client, and graphql-ws clients answer it with a pong.
          linked: (up) =>
            void ws.send(JSON.stringify({ type: 'ping', payload: { bus: up ? 'connected' : 'disconnected' } })),
        });
        return true;
      } catch (err) {
        if (err instanceof TooManyConnections) ws.close(CloseCode.TooManyRequests, err.message);
        else if (err instanceof Unauthenticated) ws.close(CloseCode.Unauthorized, err.message);
        else
          ws.close(
            CloseCode.Forbidden,
            err instanceof SvcError || err instanceof PermissionDenied ? err.message : 'Forbidden',
          );
        return false;
      }
    },
    async onSubscribe(ctx, _id, payload): Promise<ExecutionArgs | readonly GraphQLError[]> {
      const data = ctx.extra.socket.data;
      const who = data.who!;
      // graphql-ws has already entered this subscription in ctx.subscriptions: it counts itself.
      if (Object.keys(ctx.subscriptions).length > hub.options.maxSubscriptionsPerConnection) {
        return [
          new GraphQLError(`At most ${hub.options.maxSubscriptionsPerConnection} subscriptions per connection`, {
            extensions: { code: 'RATE_LIMITED' },
          }),
        ];
      }
      // graphql-ws keeps each live subscription's message: their documents together stay
      // within one request body's limit per socket (ended subscriptions leave ctx.subscriptions).
      const held = (data.held ??= new Map());
      for (const id of held.keys()) if (!(id in ctx.subscriptions)) held.delete(id);
      const bytes = Buffer.byteLength(payload.query ?? '') + Buffer.byteLength(payload.operationName ?? '');
      let total = bytes;
      for (const n of held.values()) total += n;
      if (total > LIMITS.maxBodyBytes) {
        return [
          new GraphQLError(
            `The subscriptions of one connection may hold at most ${LIMITS.maxBodyBytes} bytes of documents`,
            { extensions: { code: 'PAYLOAD_TOO_LARGE' } },
          ),
        ];
      }
      held.set(_id, bytes);
      const target = await targetOf(svc, who.key);
      // Subscriptions are sent as text: a trusted-only key may not send text (docs/documents.md).
      if (documentPolicyOf(who.key, target.snapshot) === 'trusted-only') {
        return [
          new GraphQLError('This key runs trusted documents only: subscriptions are not served to it', {
            extensions: { code: 'DOCUMENT_NOT_TRUSTED' },
          }),
        ];
      }
      const req = {
        query: payload.query,
        variables: payload.variables ?? null,
        operationName: payload.operationName ?? null,
      };
      const ready = prepareFor(target, req);
      if (!ready.ok)
        return maskErrors(ready.errors, production).map(
          (e) => new GraphQLError(e.message, { extensions: e.extensions }),
        );
      // Bounded (depth, strings) before graphql-js coerces them, recursively (issue 27 item 13).
      const badVariables = checkVariables(payload.variables, ready.argumentOf);
      if (badVariables)
        return maskErrors([badVariables], production).map(
          (e) => new GraphQLError(e.message, { extensions: e.extensions }),
        );
      if (ready.operation !== 'subscription') {
        return [
          new GraphQLError(
            'Only subscriptions are served over /graphql/ws; send queries and mutations to POST /graphql',
            { extensions: { code: 'BAD_USER_INPUT' } },
          ),
        ];
      }
      return {
        schema: schemaOf(target),
        document: ready.document,
        operationName: payload.operationName ?? undefined,
        variableValues: payload.variables ?? undefined,
        contextValue: contextFor(svc, who.key, target, who.customer, 0, true),
      };
    },
    // Errors leave masked, once, at this transport's boundary (graphql/errors.ts).
    onNext(_ctx, _id, _payload, _args, result) {
      if (!result.errors?.length) return result;
      return { ...result, errors: maskErrors(result.errors, production) } as never;
    },
    onClose(ctx) {
      ctx.extra.socket.data.release?.();
    },
  };
}
