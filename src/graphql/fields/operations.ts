import {
  GraphQLBoolean, GraphQLInt, GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLString,
  type GraphQLFieldConfigMap, type GraphQLNullableType,
} from 'graphql';
import type { KeyPrincipal } from '../../auth/principal.ts';
import { isPublicKey } from '../../auth/principal.ts';
import { hasScope, requireScope } from '../../auth/scopes.ts';
import type { ProjectSnapshot } from '../../projects/actor.ts';
import { announce, cancelExecution, createExecution, getExecution, view } from '../../operations/store.ts';
import { listScheduleRuns, listSchedules, triggerSchedule } from '../../operations/scheduler.ts';
import type { GqlContext } from '../context.ts';
import { GRAPHQL_NAME } from '../context.ts';
import { JSONScalar } from '../scalars.ts';

/**
 * Operation fields (CONTRACT §4, §9; spec "Per-operation scopes"): `execute<Op>` per operation
 * the key may run (unlisted ones are absent from its schema), the generic `executeOperation`
 * (rejects an unlisted one with `missing required scope: operations:execute:<key>`),
 * `cancelOperationExecution` (unscoped operations:execute), `operationExecution`
 * (operations:read), `schedules` / `scheduleRuns` (schedules:read), `triggerSchedule`
 * (schedules:write).
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

export const OperationExecutionType = new GraphQLObjectType({
  name: 'OperationExecution',
  fields: {
    id: { type: nn(GraphQLString) },
    status: { type: nn(GraphQLString), description: 'pending, dispatched, running, completed, failed, cancelled or timed_out (docs/operations.md).' },
    operationKey: { type: nn(GraphQLString) },
    progressPct: { type: GraphQLInt },
    progressMessage: { type: GraphQLString },
    resultJson: { type: JSONScalar },
    errorJson: { type: JSONScalar },
    attempts: { type: nn(GraphQLInt) },
    trigger: { type: nn(GraphQLString), description: 'api, hook or schedule.' },
    deadLetter: { type: nn(GraphQLBoolean), description: 'A hook execution that failed after its last retry.' },
    createdAt: { type: nn(GraphQLString) },
    updatedAt: { type: nn(GraphQLString) },
    finishedAt: { type: GraphQLString },
  },
});

const ScheduleType = new GraphQLObjectType({
  name: 'Schedule',
  fields: {
    key: { type: nn(GraphQLString) },
    operationKey: { type: nn(GraphQLString) },
    cron: { type: nn(GraphQLString) },
    timezone: { type: nn(GraphQLString) },
    enabled: { type: nn(GraphQLBoolean) },
    lastRunAt: { type: GraphQLString },
    nextRunAt: { type: GraphQLString },
  },
});

const ScheduleRunType = new GraphQLObjectType({
  name: 'ScheduleRun',
  fields: {
    scheduleKey: { type: nn(GraphQLString) },
    fireAt: { type: nn(GraphQLString) },
    manual: { type: nn(GraphQLBoolean) },
    executionId: { type: GraphQLString },
    status: { type: GraphQLString },
  },
});

/** `send-email` → `SendEmail` (CONTRACT §4: execute<OperationKeyInPascalCase>). */
export function pascal(key: string): string {
  return key.split(/[^A-Za-z0-9]+/).filter(Boolean).map((p) => p.charAt(0).toUpperCase() + p.slice(1)).join('');
}

/** The key must hold the scope; with a customer token, the customer's stamped scopes must too. */
function requireExecute(ctx: GqlContext, operationKey: string): void {
  const scope = `operations:execute:${operationKey}`;
  requireScope(ctx.principal, scope);
  // A customer runs only what their roles stamp into the token (spec: customers execute with scopes).
  if (ctx.customer) requireScope(ctx.customer.scopes, scope);
}

async function execute(ctx: GqlContext, operationKey: string, input: unknown) {
  requireExecute(ctx, operationKey);
  const createdBy = ctx.customer?.customerId ?? ctx.principal.keyId;
  const row = await createExecution(ctx.svc.sql, { projectId: ctx.snapshot.id, operationKey, input, createdBy });
  await announce(ctx.svc.bus, [row]);
  ctx.noStore = true;
  return view(row);
}

export function operationFields(snapshot: ProjectSnapshot, principal: KeyPrincipal): {
  query: GraphQLFieldConfigMap<unknown, GqlContext>;
  mutation: GraphQLFieldConfigMap<unknown, GqlContext>;
} {
  const query: GraphQLFieldConfigMap<unknown, GqlContext> = {
    operationExecution: {
      type: OperationExecutionType,
      args: { id: { type: nn(GraphQLString) } },
      resolve: async (_r, args, ctx) => {
        requireScope(ctx.principal, 'operations:read');
        ctx.noStore = true;
        const row = await getExecution(ctx.svc.sql, ctx.snapshot.id, String(args.id));
        return row ? view(row) : null;
      },
    },
    schedules: {
      type: nn(new GraphQLList(nn(ScheduleType))),
      resolve: (_r, _a, ctx) => {
        requireScope(ctx.principal, 'schedules:read');
        ctx.noStore = true;
        return listSchedules(ctx.svc.sql, ctx.snapshot.id);
      },
    },
    scheduleRuns: {
      type: nn(new GraphQLList(nn(ScheduleRunType))),
      args: { scheduleKey: { type: GraphQLString }, first: { type: GraphQLInt } },
      resolve: (_r, args, ctx) => {
        requireScope(ctx.principal, 'schedules:read');
        ctx.noStore = true;
        return listScheduleRuns(ctx.svc.sql, ctx.snapshot.id, args.scheduleKey ?? null, args.first ?? 50);
      },
    },
  };
  const mutation: GraphQLFieldConfigMap<unknown, GqlContext> = {};
  // Public keys get mutations only for what they were granted (spec: no write fields otherwise).
  const mayExecuteSome = hasScope(principal, 'operations:execute') || [...principal.scopes].some((s) => s.startsWith('operations:execute:'));
  if (!isPublicKey(principal.kind) || mayExecuteSome) {
    mutation.executeOperation = {
      type: nn(OperationExecutionType),
      args: { key: { type: nn(GraphQLString) }, input: { type: JSONScalar } },
      resolve: (_r, args, ctx) => execute(ctx, String(args.key), args.input),
    };
  }
  for (const op of snapshot.operations) {
    const name = `execute${pascal(op.key)}`;
    if (!GRAPHQL_NAME.test(name) || name in mutation || !hasScope(principal, `operations:execute:${op.key}`)) continue;
    mutation[name] = {
      type: nn(OperationExecutionType),
      description: op.description ?? op.name ?? undefined,
      args: { input: { type: JSONScalar } },
      resolve: (_r, args, ctx) => execute(ctx, op.key, args.input),
    };
  }
  if (!isPublicKey(principal.kind)) {
    mutation.cancelOperationExecution = {
      type: nn(OperationExecutionType),
      args: { id: { type: nn(GraphQLString) } },
      resolve: async (_r, args, ctx) => {
        requireScope(ctx.principal, 'operations:execute');
        return view(await cancelExecution(ctx.svc.sql, ctx.svc.bus, ctx.snapshot.id, String(args.id)));
      },
    };
    mutation.triggerSchedule = {
      type: nn(ScheduleRunType),
      args: { key: { type: nn(GraphQLString) } },
      resolve: (_r, args, ctx) => {
        requireScope(ctx.principal, 'schedules:write');
        return triggerSchedule(ctx.svc.sql, ctx.svc.bus, ctx.snapshot.id, String(args.key));
      },
    };
  }
  return { query, mutation };
}
