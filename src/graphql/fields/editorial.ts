import {
  GraphQLID,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import type { ModelDef } from '../../projects/types.ts';
import { BadUserInput, NotFound } from '../../errors.ts';
import { run } from '../../content/db.ts';
import { checkVersion, contentAt, fitContent, restoreStep } from '../../editorial/restore.ts';
import { cancelScheduled, checkAt, createScheduled, listScheduled } from '../../editorial/schedule.ts';
import { NO_ORIGIN } from '../../editorial/audit.ts';
import { typeName, type GqlContext } from '../context.ts';
import type { TypeFactory } from '../model-types.ts';
import { DateTimeScalar } from '../scalars.ts';
import { requireModelScope, requireScope } from '../resolvers.ts';
import { auditWho, writeContext, writeOne } from '../writes.ts';
import { checkFieldWrites } from '../../content/field-access.ts';
import { LIMITS } from '../limits.ts';

/**
 * Editorial workflow fields (docs/restore.md, docs/scheduling.md; names: CONTRACT §11):
 * `restore<Model>Version`, `schedule<Model>Publish`, `schedule<Model>Unpublish` per model, and
 * `restoreRecordVersion`, `scheduledActions`, `cancelScheduledAction` beside the generic record
 * fields. Secret keys (and members) only, like every other write.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

export const ScheduledAction = new GraphQLObjectType({
  name: 'ScheduledAction',
  description: 'A publish or unpublish waiting for its time (docs/scheduling.md).',
  fields: {
    id: { type: nn(GraphQLID) },
    action: { type: nn(GraphQLString), description: '"publish" or "unpublish".' },
    modelKey: { type: GraphQLString },
    recordId: { type: GraphQLID },
    version: {
      type: GraphQLInt,
      description: 'The version whose content is published (null: the working version when it fires).',
    },
    at: { type: nn(DateTimeScalar) },
    status: { type: nn(GraphQLString), description: '"scheduled", "done", "cancelled" or "failed".' },
    error: { type: GraphQLString, description: 'Why a failed action failed.' },
  },
});

/** Restore of `version` as the new working version; answers the record in `locale` (default locale). */
async function restore(ctx: GqlContext, model: ModelDef, id: string, version: number) {
  requireModelScope(ctx, 'records:write', model);
  checkVersion(version);
  const w = writeContext(ctx);
  const content = fitContent(
    w,
    model,
    await contentAt(ctx.svc.readSql, ctx.snapshot.id, model, id, version, ctx.snapshot.defaultLocale),
    version,
  );
  for (const data of Object.values(content)) checkFieldWrites(ctx, model, data, { recordId: id, ownedByCaller: false });
  return writeOne(ctx, restoreStep(w, model, id, content, version, null), null);
}

async function schedule(
  ctx: GqlContext,
  model: ModelDef,
  action: 'publish' | 'unpublish',
  args: { _id: string; at: unknown; version?: number | null },
) {
  requireModelScope(ctx, 'records:publish', model);
  ctx.noStore = true;
  const at = checkAt(args.at);
  let content = null;
  const version = args.version ?? null;
  if (version !== null) {
    checkVersion(version);
    // The version's content is fixed now: later edits do not change what this publishes.
    content = fitContent(
      writeContext(ctx),
      model,
      await contentAt(ctx.svc.readSql, ctx.snapshot.id, model, args._id, version, ctx.snapshot.defaultLocale),
      version,
    );
  }
  ctx.audited = true;
  return createScheduled(
    ctx.svc.sql,
    {
      projectId: ctx.snapshot.id,
      tenantId: ctx.snapshot.tenantId,
      action,
      modelKey: model.key,
      recordId: args._id,
      version,
      content,
      at,
      createdBy: auditWho(ctx),
    },
    ctx.auditFrom?.() ?? NO_ORIGIN,
  );
}

export function editorialModelMutations(
  types: TypeFactory,
  model: ModelDef,
): GraphQLFieldConfigMap<unknown, GqlContext> {
  const T = nn(types.recordType(model));
  const name = typeName(model.key);
  return {
    [`restore${name}Version`]: {
      type: T,
      description: "Makes a version's content the new working version (a new history entry; nothing is rewritten).",
      args: { _id: { type: nn(GraphQLID) }, version: { type: nn(GraphQLInt) } },
      resolve: (_r, args, ctx) => restore(ctx, model, args._id, args.version),
    },
    [`schedule${name}Publish`]: {
      type: nn(ScheduledAction),
      description:
        'Publishes the record at `at`: the content of `version` when given (as it was then), else the working version as it stands at `at`.',
      args: { _id: { type: nn(GraphQLID) }, at: { type: nn(DateTimeScalar) }, version: { type: GraphQLInt } },
      resolve: (_r, args, ctx) => schedule(ctx, model, 'publish', args),
    },
    [`schedule${name}Unpublish`]: {
      type: nn(ScheduledAction),
      args: { _id: { type: nn(GraphQLID) }, at: { type: nn(DateTimeScalar) } },
      resolve: (_r, args, ctx) => schedule(ctx, model, 'unpublish', args),
    },
  };
}

/** The model of a record of this project the key may see, or NOT_FOUND (one query). */
async function modelOf(ctx: GqlContext, id: string): Promise<ModelDef> {
  const rows =
    typeof id === 'string' && id.length <= 200
      ? await run<{ model_key: string }>(
          ctx.svc.readSql,
          'select model_key from records where id = $1::text and project_id = $2::text',
          [id, ctx.snapshot.id],
        )
      : [];
  const model = rows[0] && ctx.models.get(rows[0].model_key);
  if (!model) throw new NotFound(`No record with _id "${id}"`);
  return model;
}

export function editorialGenericFields(types: TypeFactory): {
  query: GraphQLFieldConfigMap<unknown, GqlContext>;
  mutation: GraphQLFieldConfigMap<unknown, GqlContext>;
} {
  const conn = types.connection('ScheduledAction', ScheduledAction);
  return {
    query: {
      scheduledActions: {
        type: nn(conn),
        description: 'Scheduled publishes and unpublishes, soonest first (every status; records:publish).',
        args: { first: { type: GraphQLInt }, after: { type: GraphQLString }, modelKey: { type: GraphQLString } },
        resolve: async (_r, args, ctx) => {
          requireScope(ctx, 'records:publish');
          ctx.noStore = true;
          const first = args.first ?? 50;
          if (!Number.isSafeInteger(first) || first < 1 || first > LIMITS.maxPageSize)
            throw new BadUserInput(`first must be from 1 to ${LIMITS.maxPageSize}`, { field: 'first' });
          const page = await listScheduled(ctx.svc.sql, ctx.snapshot.id, {
            first,
            after: args.after ?? null,
            modelKey: args.modelKey ?? null,
            modelKeys: [...ctx.models.keys()],
          });
          return {
            edges: page.items.map(({ cursor, ...node }) => ({ node, cursor })),
            pageInfo: { hasNextPage: page.hasNextPage, endCursor: page.endCursor },
            totalCount: page.totalCount,
          };
        },
      },
    },
    mutation: {
      restoreRecordVersion: {
        type: nn(types.recordInterface),
        description: "Generic restoreXVersion: the version's content becomes the new working version.",
        args: { _id: { type: nn(GraphQLID) }, version: { type: nn(GraphQLInt) } },
        resolve: async (_r, args, ctx) => restore(ctx, await modelOf(ctx, args._id), args._id, args.version),
      },
      cancelScheduledAction: {
        type: nn(ScheduledAction),
        args: { id: { type: nn(GraphQLID) } },
        resolve: async (_r, args, ctx) => {
          requireScope(ctx, 'records:publish');
          ctx.noStore = true;
          ctx.audited = true;
          return cancelScheduled(ctx.svc.sql, ctx.snapshot.id, args.id, [...ctx.models.keys()], {
            tenantId: ctx.snapshot.tenantId,
            who: auditWho(ctx),
            from: ctx.auditFrom?.() ?? NO_ORIGIN,
          });
        },
      },
    },
  };
}
