import {
  GraphQLID,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
} from 'graphql';
import { hasScope, missingScope } from '../auth/scopes.ts';
import { BadUserInput, NotFound, PermissionDenied } from '../errors.ts';
import { executionCreator } from '../operations/store.ts';
import type { GqlContext, GraphqlDeps } from './context.ts';
import { JSONScalar } from './scalars.ts';

/**
 * The Subscription root (spec "Subscriptions endpoint"): `recordChanged(modelKey)` with a flat
 * payload and `operationExecution(id)`. Events come from a source the realtime hub installs for
 * the process (src/realtime/subscriptions.ts): the same channel actors `/_events` uses.
 */
export interface SubscriptionSource {
  /** Calls `onEvent` with each event's data on a channel of a project; resolves to the remover. */
  listen(projectId: string, channel: string, onEvent: (data: Record<string, unknown>) => void): Promise<() => void>;
}

const sources = new WeakMap<GraphqlDeps, SubscriptionSource>();

export function installSubscriptionSource(deps: GraphqlDeps, source: SubscriptionSource): () => void {
  sources.set(deps, source);
  return () => sources.delete(deps);
}

/** Events waiting for a slow reader of one subscription before it fails instead of growing. */
const MAX_QUEUED = 1000;

/** Push (channel actor) to pull (graphql-js async iterator), bounded. */
function iterate(
  source: SubscriptionSource,
  projectId: string,
  channel: string,
  map: (d: Record<string, unknown>) => unknown,
): AsyncIterableIterator<unknown> {
  const queue: unknown[] = [];
  let waiting: ((r: IteratorResult<unknown>) => void) | undefined;
  let failed: Error | undefined;
  let done = false;
  let remove: (() => void) | undefined;
  const ready = source
    .listen(projectId, channel, (d) => {
      if (done) return;
      const value = map(d);
      if (waiting) {
        const w = waiting;
        waiting = undefined;
        w({ value, done: false });
      } else if (queue.length >= MAX_QUEUED) failed = new Error('Subscriber too slow: events dropped');
      else queue.push(value);
    })
    .then((r) => {
      remove = r;
      if (done) r();
    });
  const finish = async (): Promise<IteratorResult<unknown>> => {
    done = true;
    remove?.();
    queue.length = 0;
    if (waiting) waiting({ value: undefined, done: true });
    return { value: undefined, done: true };
  };
  return {
    async next() {
      await ready;
      if (failed) {
        await finish();
        throw failed;
      }
      if (queue.length) return { value: queue.shift(), done: false };
      if (done) return { value: undefined, done: true };
      return new Promise((resolve) => (waiting = resolve));
    },
    return: finish,
    throw: async (err) => {
      await finish();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

const nn = GraphQLNonNull;

const RecordChanged = new GraphQLObjectType({
  name: 'RecordChangedEvent',
  fields: {
    action: { type: new nn(GraphQLString), description: 'created, updated, published, unpublished or deleted.' },
    recordId: { type: new nn(GraphQLID) },
    modelKey: { type: new nn(GraphQLString) },
    userId: { type: GraphQLString, description: 'Who made the change, if known.' },
  },
});

const ExecutionEvent = new GraphQLObjectType({
  name: 'OperationExecutionEvent',
  fields: {
    id: { type: new nn(GraphQLString) },
    status: {
      type: new nn(GraphQLString),
      description: 'pending, dispatched, running, completed, failed, cancelled or timed_out.',
    },
    progressPct: { type: GraphQLInt },
    progressMessage: { type: GraphQLString },
    resultJson: { type: JSONScalar },
    errorJson: { type: JSONScalar },
  },
});

function sourceOf(ctx: GqlContext): SubscriptionSource {
  const s = sources.get(ctx.svc);
  if (!s) throw new BadUserInput('Subscriptions are served over WebSocket at /graphql/ws');
  return s;
}

export function subscriptionFields(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    recordChanged: {
      type: new nn(RecordChanged),
      args: { modelKey: { type: new nn(GraphQLString) } },
      subscribe: (_r, args: { modelKey: string }, ctx) => {
        // A model-restricted key sees only its models: any other is as good as absent.
        if (!ctx.models.has(args.modelKey)) {
          if (ctx.snapshot.models.some((m) => m.key === args.modelKey))
            throw missingScope(`records:read:${args.modelKey}`);
          throw new BadUserInput(`No model "${args.modelKey}"`);
        }
        if (!hasScope(ctx.principal, `records:read:${args.modelKey}`))
          throw missingScope(
            hasScope(ctx.principal, 'records:read') ? `records:read:${args.modelKey}` : 'records:read',
          );
        // Owner-only and closed models (model access.read): events would name other customers' records.
        if (ctx.rows && (ctx.rows.owned.includes(args.modelKey) || ctx.rows.closed.includes(args.modelKey)))
          throw new PermissionDenied('Insufficient permissions');
        return iterate(sourceOf(ctx), ctx.snapshot.id, `changes:${args.modelKey}`, (d) => d);
      },
      resolve: (payload) => payload,
    },
    operationExecution: {
      type: new nn(ExecutionEvent),
      args: { id: { type: new nn(GraphQLString) } },
      subscribe: async (_r, args: { id: string }, ctx) => {
        const mayReadAll = hasScope(ctx.principal, 'operations:read');
        // Without operations:read, only the customer who executed it follows an execution.
        if (!mayReadAll && !ctx.customer) throw missingScope('operations:read');
        if (!/^[A-Za-z0-9_-]{1,128}$/.test(args.id)) throw new BadUserInput('id is not an execution id');
        // Another project's execution reads as unknown: nothing is said about it.
        const row = await executionCreator(ctx.svc.sql, ctx.snapshot.id, args.id);
        if (!mayReadAll && row?.createdBy !== ctx.customer?.customerId) throw missingScope('operations:read');
        if (!row) throw new NotFound(`No execution "${args.id}"`);
        return iterate(sourceOf(ctx), ctx.snapshot.id, `jobs:${args.id}`, (d) => d);
      },
      resolve: (payload) => payload,
    },
  };
}
