import {
  GraphQLBoolean, GraphQLEnumType, GraphQLID, GraphQLInputObjectType, GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLString,
  type GraphQLFieldConfigMap, type GraphQLNullableType,
} from 'graphql';
import type { ModelDef } from '../models/types.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import { createRecord, deleteRecord, modelKeyOf, publishRecord, unpublishRecord, updateRecord } from '../content/write.ts';
import type { RecordNode } from '../content/types.ts';
import { typeName, type GqlContext } from './context.ts';
import type { TypeFactory } from './model-types.ts';
import { JSONScalar } from './scalars.ts';
import { draftNode, inTransaction, requireModelScope } from './resolvers.ts';
import { LIMITS } from './limits.ts';
import { checkFieldWrites } from './field-access.ts';

/** Write fields of CONTRACT §4; present only in schemas of secret keys. */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

async function mustNode(ctx: GqlContext, id: string, locale?: string | null): Promise<RecordNode> {
  const n = await draftNode(ctx, id, locale);
  if (!n) throw new NotFound(`No record with _id "${id}"`);
  return n;
}

export function modelMutations(types: TypeFactory, model: ModelDef): GraphQLFieldConfigMap<unknown, GqlContext> {
  const T = nn(types.recordType(model));
  const input = nn(types.inputType(model));
  const name = typeName(model.key);
  return {
    [`create${name}`]: {
      type: T,
      args: { naturalKey: { type: GraphQLString }, locale: { type: GraphQLString }, data: { type: input } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:write', model);
        checkFieldWrites(ctx, model, args.data, { recordId: null });
        const id = await inTransaction(ctx, (tx, w) => createRecord(tx, w, model, args));
        return mustNode(ctx, id, args.locale);
      },
    },
    [`update${name}`]: {
      type: T,
      args: { _id: { type: nn(GraphQLID) }, locale: { type: GraphQLString }, data: { type: input } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:write', model);
        checkFieldWrites(ctx, model, args.data, { recordId: args._id });
        await inTransaction(ctx, (tx, w) => updateRecord(tx, w, model, args._id, args.locale, args.data));
        return mustNode(ctx, args._id, args.locale);
      },
    },
    [`publish${name}Version`]: {
      type: T,
      args: { _id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:publish', model);
        await inTransaction(ctx, (tx, w) => publishRecord(tx, w, model, args._id));
        return mustNode(ctx, args._id);
      },
    },
    [`unpublish${name}`]: {
      type: T,
      args: { _id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:publish', model);
        await inTransaction(ctx, (tx, w) => unpublishRecord(tx, w, model, args._id));
        return mustNode(ctx, args._id);
      },
    },
    [`delete${name}`]: {
      type: nn(GraphQLBoolean),
      args: { _id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:delete', model);
        await inTransaction(ctx, (tx, w) => deleteRecord(tx, w, model, args._id));
        return true;
      },
    },
  };
}

const BatchAction = new GraphQLEnumType({
  name: 'BatchRecordAction',
  values: { CREATE: { value: 'create' }, UPDATE: { value: 'update' }, PUBLISH: { value: 'publish' }, UNPUBLISH: { value: 'unpublish' }, DELETE: { value: 'delete' } },
});

const SCOPE_OF: Record<string, string> = { create: 'records:write', update: 'records:write', publish: 'records:publish', unpublish: 'records:publish', delete: 'records:delete' };

interface BatchOp {
  action: string;
  modelKey?: string | null;
  _id?: string | null;
  naturalKey?: string | null;
  locale?: string | null;
  data?: unknown;
}

/** `batchRecordOperations`: every operation in one transaction; any failure rolls back all of them. */
export function batchMutation(types: TypeFactory): GraphQLFieldConfigMap<unknown, GqlContext> {
  const input = new GraphQLInputObjectType({
    name: 'BatchRecordOperationInput',
    fields: {
      action: { type: nn(BatchAction) },
      modelKey: { type: GraphQLString, description: 'Required for CREATE; otherwise taken from the record.' },
      _id: { type: GraphQLID },
      naturalKey: { type: GraphQLString },
      locale: { type: GraphQLString },
      data: { type: JSONScalar },
    },
  });
  const result = new GraphQLObjectType({
    name: 'BatchRecordOperationResult',
    fields: { action: { type: nn(BatchAction) }, _id: { type: nn(GraphQLID) }, record: { type: types.recordInterface } },
  });
  return {
    batchRecordOperations: {
      type: nn(new GraphQLList(nn(result))),
      args: { operations: { type: nn(new GraphQLList(nn(input))) } },
      resolve: async (_r, args: { operations: BatchOp[] }, ctx) => {
        const ops = args.operations;
        if (ops.length > LIMITS.maxBatchOperations) throw new BadUserInput(`At most ${LIMITS.maxBatchOperations} operations per batch`, { field: 'operations' });
        const done = await inTransaction(ctx, async (tx, w) => {
          const out: { action: string; _id: string; locale: string | null | undefined }[] = [];
          for (const [i, op] of ops.entries()) {
            let id = op._id ?? null;
            let modelKey = op.modelKey ?? null;
            if (op.action !== 'create') {
              if (!id) throw new BadUserInput(`operations.${i}._id is required for ${op.action.toUpperCase()}`, { field: `operations.${i}._id` });
              const actual = await modelKeyOf(tx, ctx.snapshot.id, id);
              if (!actual || (modelKey && modelKey !== actual) || !ctx.models.has(actual)) throw new NotFound(`operations.${i}: no record with _id "${id}"`);
              modelKey = actual;
            }
            const model = modelKey ? ctx.models.get(modelKey) : undefined;
            if (!model) throw new BadUserInput(`operations.${i}.modelKey names no model`, { field: `operations.${i}.modelKey` });
            requireModelScope(ctx, SCOPE_OF[op.action]!, model);
            // Inside the transaction: a denied field rolls back the operations before it too.
            if (op.action === 'create' || op.action === 'update') checkFieldWrites(ctx, model, op.data, { recordId: id });
            if (op.action === 'create') id = await createRecord(tx, w, model, { naturalKey: op.naturalKey, locale: op.locale, data: op.data ?? {} });
            else if (op.action === 'update') await updateRecord(tx, w, model, id!, op.locale, op.data ?? {});
            else if (op.action === 'publish') await publishRecord(tx, w, model, id!);
            else if (op.action === 'unpublish') await unpublishRecord(tx, w, model, id!);
            else await deleteRecord(tx, w, model, id!);
            out.push({ action: op.action, _id: id!, locale: op.locale });
          }
          return out;
        });
        return Promise.all(done.map(async (d) => ({ action: d.action, _id: d._id, record: d.action === 'delete' ? null : await ctx.loader.load(d._id, 'draft', d.locale ?? ctx.snapshot.defaultLocale) })));
      },
    },
  };
}
