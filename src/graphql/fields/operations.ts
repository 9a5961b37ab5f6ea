import {
  GraphQLBoolean,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
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
import type { CustomerGrants } from '../grants.ts';

/**
 * Operation fields (CONTRACT §4, §9; spec "Per-operation scopes"): `execute<Op>` per operation
 * the key may run (unlisted ones are absent from its schema), the generic `executeOperation`
 * (rejects an unlisted one with `missing required scope: operations:execute:<key>`),
 * `cancelOperationExecution` (unscoped operations:execute: the key's, or through a public key a
 * customer role's, for the customer's own executions), `operationExecution`
 * (operations:read), `schedules` / `scheduleRuns` (schedules:read), `triggerSchedule`
 * (schedules:write).
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

export const OperationExecutionType = new GraphQLObjectType({
  name: 'OperationExecution',
  fields: {
    id: { type: nn(GraphQLString) },
    status: {
      type: nn(GraphQLString),
      description: 'pending, dispatched, running, completed, failed, cancelled or timed_out (docs/operations.md).',
    },
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
  return key
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join('');
}

/**
 * Whose scopes decide an execution: through a public key with a customer token, the customer's
 * stamped scopes alone (customer roles rule 2: the key never grants execute to customers, only
 * the role does); otherwise the key's, and with a customer token beside a secret key the
 * customer's too (a customer runs only what their roles stamp, whatever the key holds).
 */
function requireExecute(ctx: GqlContext, operationKey: string): void {
  const scope = `operations:execute:${operationKey}`;
  if (ctx.customer && isPublicKey(ctx.principal.kind)) {
    requireScope(ctx.customer.scopes, scope);
    return;
  }
  requireScope(ctx.principal, scope);
  if (ctx.customer) requireScope(ctx.customer.scopes, scope);
}

/**
 * `operations:read` on the key, or the customer of the request executed it (they follow what
 * they ran: here and on `jobs:{executionId}`).
 */
export function mayReadExecution(ctx: Pick<GqlContext, 'principal' | 'customer'>, createdBy: string | null): boolean {
  return hasScope(ctx.principal, 'operations:read') || (!!ctx.customer && createdBy === ctx.customer.customerId);
}

async function execute(ctx: GqlContext, operationKey: string, input: unknown) {
  requireExecute(ctx, operationKey);
  const createdBy = ctx.customer?.customerId ?? ctx.principal.keyId;
  const row = await createExecution(ctx.svc.sql, { projectId: ctx.snapshot.id, operationKey, input, createdBy });
  await announce(ctx.svc.bus, [row]);
  ctx.noStore = true;
  return view(row);
}

export function operationFields(
  snapshot: ProjectSnapshot,
  principal: KeyPrincipal,
  grants: CustomerGrants | null = null,
): {
  query: GraphQLFieldConfigMap<unknown, GqlContext>;
  mutation: GraphQLFieldConfigMap<unknown, GqlContext>;
} {
  const query: GraphQLFieldConfigMap<unknown, GqlContext> = {
    operationExecution: {
      type: OperationExecutionType,
      args: { id: { type: nn(GraphQLString) } },
      resolve: async (_r, args, ctx) => {
        ctx.noStore = true;
        if (!ctx.customer) requireScope(ctx.principal, 'operations:read');
        const row = await getExecution(ctx.svc.sql, ctx.snapshot.id, String(args.id));
        // Whether an execution exists is said only to those who may read it.
        if (!mayReadExecution(ctx, row?.created_by ?? null)) requireScope(ctx.principal, 'operations:read');
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
  // A key that may execute nothing sees no execute field, generic or typed (spec "Per-operation
  // scopes" rule 2); the generic one appears with the first operation it may run.
  // A customer's stamped grants (through a public key) add their operations to the key's.
  const mayExecuteSome =
    hasScope(principal, 'operations:execute') ||
    [...principal.scopes].some((s) => s.startsWith('operations:execute:')) ||
    !!grants?.executeSome;
  if (mayExecuteSome) {
    mutation.executeOperation = {
      type: nn(OperationExecutionType),
      args: { key: { type: nn(GraphQLString) }, input: { type: JSONScalar } },
      resolve: (_r, args, ctx) => execute(ctx, String(args.key), args.input),
    };
  }
  for (const op of snapshot.operations) {
    const name = `execute${pascal(op.key)}`;
    if (
      !GRAPHQL_NAME.test(name) ||
      name in mutation ||
      !(hasScope(principal, `operations:execute:${op.key}`) || grants?.executes.has(op.key))
    )
      continue;
    mutation[name] = {
      type: nn(OperationExecutionType),
      description: op.description ?? op.name ?? undefined,
      args: { input: { type: JSONScalar } },
      resolve: (_r, args, ctx) => execute(ctx, op.key, args.input),
    };
  }
  // Through a public key, a customer whose role stamps unscoped operations:execute cancels the
  // executions they started (spec: cancel needs the unscoped scope; the role supplies it).
  if (!isPublicKey(principal.kind) || grants?.executeAll) {
    mutation.cancelOperationExecution = {
      type: nn(OperationExecutionType),
      args: { id: { type: nn(GraphQLString) } },
      resolve: async (_r, args, ctx) => {
        let own: string | null = null;
        if (ctx.customer && isPublicKey(ctx.principal.kind)) {
          requireScope(ctx.customer.scopes, 'operations:execute');
          own = ctx.customer.customerId;
        } else requireScope(ctx.principal, 'operations:execute');
        ctx.noStore = true;
        return view(await cancelExecution(ctx.svc.sql, ctx.svc.bus, ctx.snapshot.id, String(args.id), own));
      },
    };
  }
  if (!isPublicKey(principal.kind)) {
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
