import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import type { ModelDef } from '../projects/types.ts';
import { BadUserInput, NotFound } from '../errors.ts';
import {
  createRecord,
  deleteRecord,
  modelKeysOf,
  publishRecord,
  unpublishRecord,
  updateRecord,
  type WriteStep,
} from '../content/write.ts';
import { deleteVariant, updateVariant } from '../content/write-variants.ts';
import { DEFAULT_VARIANT, ruleErrors, VARIANT_ID_RE } from '../content/targeting.ts';
import type { ContentRow } from '../content/types.ts';
import type { Handle } from '../content/tx.ts';
import { createMany } from '../content/import.ts';
import { typeName, type GqlContext } from './context.ts';
import type { TypeFactory } from './model-types.ts';
import { JSONScalar } from './scalars.ts';
import { checkLocale, node, requireModelScope } from './resolvers.ts';
import { commit, draftScope, newTx, readBack, writeContext, writeOne } from './writes.ts';
import { LIMITS } from './limits.ts';
import { checkFieldWrites } from '../content/field-access.ts';
import { ownerOf, ownerStatement } from '../content/owner.ts';
import { isPublicKey } from '../auth/principal.ts';
import { PermissionDenied } from '../errors.ts';

/** Write fields of CONTRACT §4; present only in schemas of secret keys. */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

/**
 * Whether the customer of the token owns the record. Through a public key a customer writes
 * only their own records (their scopes come from `self:*` or a role, never from the key): any
 * other record is PERMISSION_DENIED.
 */
async function callerOwns(ctx: GqlContext, id: string): Promise<boolean> {
  if (!ctx.customer) return false;
  const owner = await ownerOf(ctx.svc.readSql, ctx.snapshot.id, id);
  if (owner === undefined) throw new NotFound(`No record with _id "${id}"`);
  const own = owner === ctx.customer.customerId;
  if (!own && isPublicKey(ctx.principal.kind)) throw new PermissionDenied('Insufficient permissions');
  return own;
}

/**
 * The variant a write addresses: null for the default content. Rules are a list of rule nodes
 * (content/targeting.ts); a single node is taken as a list of one.
 */
function variantOf(args: {
  variantId?: string | null;
  variantRules?: unknown;
}): { variantId: string; rules: unknown[] | null } | null {
  const id = args.variantId ?? null;
  const rules =
    args.variantRules === undefined || args.variantRules === null
      ? null
      : Array.isArray(args.variantRules)
        ? args.variantRules
        : [args.variantRules];
  if (id === null || id === DEFAULT_VARIANT) {
    if (rules)
      throw new BadUserInput('variantRules need a variantId: the default content has no rules', {
        field: 'variantRules',
      });
    return null;
  }
  if (typeof id !== 'string' || !VARIANT_ID_RE.test(id))
    throw new BadUserInput(
      'variantId must start with a letter or digit and hold only letters, digits, _ and - (at most 64)',
      { field: 'variantId' },
    );
  if (rules) {
    const errors = ruleErrors(rules, 'variantRules', true);
    if (errors.length) throw new BadUserInput(`${errors[0]!.path}: ${errors[0]!.message}`, { field: 'variantRules' });
  }
  return { variantId: id, rules };
}

/** The writes a customer may make through a public key: create and update of their own records (no variants). */
export function customerModelMutations(
  types: TypeFactory,
  model: ModelDef,
): GraphQLFieldConfigMap<unknown, GqlContext> {
  const all = modelMutations(types, model, false);
  const name = typeName(model.key);
  return { [`create${name}`]: all[`create${name}`]!, [`update${name}`]: all[`update${name}`]! };
}

export function modelMutations(
  types: TypeFactory,
  model: ModelDef,
  variants = true,
): GraphQLFieldConfigMap<unknown, GqlContext> {
  const T = nn(types.recordType(model));
  const input = nn(types.inputs.inputType(model));
  const name = typeName(model.key);
  const variantArgs: GraphQLFieldConfigArgumentMap = variants
    ? {
        variantId: {
          type: GraphQLString,
          description: 'Write this variant instead of the default content (docs/graphql.md, Variants).',
        },
        variantRules: {
          type: JSONScalar,
          description: "The variant's targeting rules (a list of rule nodes); kept when omitted.",
        },
      }
    : {};
  const fields: GraphQLFieldConfigMap<unknown, GqlContext> = {
    [`create${name}`]: {
      type: T,
      args: {
        naturalKey: { type: GraphQLString },
        locale: { type: GraphQLString },
        data: { type: input },
        ...variantArgs,
      },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:write', model);
        checkFieldWrites(ctx, model, args.data, { recordId: null });
        checkLocale(ctx, args.locale);
        const variant = variantOf(args);
        const w = writeContext(ctx);
        const step = createRecord(w, model, args);
        // A record a customer creates is theirs (src/content/owner.ts), in the same transaction.
        const customer = ctx.customer;
        const follow = customer ? [ownerStatement(ctx.snapshot.id, step.recordId, customer.customerId)] : [];
        // A create with a variant: the data is the default content and starts the variant too.
        if (variant) follow.push(...updateVariant(w, model, step.recordId, args.locale, {}, variant).statements);
        return writeOne(ctx, step, args.locale, follow, variant?.variantId);
      },
    },
    [`update${name}`]: {
      type: T,
      args: { _id: { type: nn(GraphQLID) }, locale: { type: GraphQLString }, data: { type: input }, ...variantArgs },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:write', model);
        checkLocale(ctx, args.locale);
        const variant = variantOf(args);
        const ownedByCaller = await callerOwns(ctx, args._id);
        checkFieldWrites(ctx, model, args.data, { recordId: args._id, ownedByCaller });
        const step = variant
          ? updateVariant(writeContext(ctx), model, args._id, args.locale, args.data, variant)
          : updateRecord(writeContext(ctx), model, args._id, args.locale, args.data);
        return writeOne(ctx, step, args.locale, [], variant?.variantId);
      },
    },
    [`publish${name}Version`]: {
      type: T,
      args: { _id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:publish', model);
        return writeOne(ctx, publishRecord(writeContext(ctx), model, args._id), null);
      },
    },
    [`unpublish${name}`]: {
      type: T,
      args: { _id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:publish', model);
        return writeOne(ctx, unpublishRecord(writeContext(ctx), model, args._id), null);
      },
    },
    [`delete${name}`]: {
      type: nn(GraphQLBoolean),
      args: { _id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:delete', model);
        await commit(ctx, newTx(ctx).write(deleteRecord(writeContext(ctx), model, args._id)));
        return true;
      },
    },
  };
  if (variants) {
    fields[`delete${name}Variant`] = {
      type: T,
      description: 'Removes a variant from every locale of the working version; answers with the default content.',
      args: { _id: { type: nn(GraphQLID) }, variantId: { type: nn(GraphQLString) } },
      resolve: async (_r, args, ctx) => {
        requireModelScope(ctx, 'records:write', model);
        const variant = variantOf({ variantId: args.variantId });
        if (!variant) throw new BadUserInput('The default variant cannot be deleted', { field: 'variantId' });
        return writeOne(ctx, deleteVariant(writeContext(ctx), model, args._id, variant.variantId), null);
      },
    };
  }
  return fields;
}

const BatchAction = new GraphQLEnumType({
  name: 'BatchRecordAction',
  values: {
    CREATE: { value: 'create' },
    UPDATE: { value: 'update' },
    PUBLISH: { value: 'publish' },
    UNPUBLISH: { value: 'unpublish' },
    DELETE: { value: 'delete' },
  },
});

const SCOPE_OF: Record<string, string> = {
  create: 'records:write',
  update: 'records:write',
  publish: 'records:publish',
  unpublish: 'records:publish',
  delete: 'records:delete',
};

interface BatchOp {
  action: string;
  modelKey?: string | null;
  _id?: string | null;
  naturalKey?: string | null;
  locale?: string | null;
  data?: unknown;
}

/**
 * `batchRecordOperations`: every operation in one transaction, one commit; any failure rolls
 * back all of them. Operations addressed by `_id` without `modelKey` need their records' models
 * before their data can be checked: those are read with BEGIN, the one read a write transaction
 * waits for (WriteTx.prelude).
 */
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
    fields: {
      action: { type: nn(BatchAction) },
      _id: { type: nn(GraphQLID) },
      record: { type: types.recordInterface },
    },
  });
  return {
    batchRecordOperations: {
      type: nn(new GraphQLList(nn(result))),
      args: { operations: { type: nn(new GraphQLList(nn(input))) } },
      resolve: async (_r, args: { operations: BatchOp[] }, ctx) => {
        const ops = args.operations;
        if (ops.length > LIMITS.maxBatchOperations)
          throw new BadUserInput(`At most ${LIMITS.maxBatchOperations} operations per batch`, { field: 'operations' });
        for (const [i, op] of ops.entries()) {
          if (op.action !== 'create' && !op._id)
            throw new BadUserInput(`operations.${i}._id is required for ${op.action.toUpperCase()}`, {
              field: `operations.${i}._id`,
            });
          if (op.locale !== undefined && op.locale !== null) checkLocale(ctx, op.locale, `operations.${i}.locale`);
        }
        const w = writeContext(ctx);
        const tx = newTx(ctx);
        const out: { action: string; _id: string; locale: string }[] = [];
        const reads: { locale: string; handle: Handle<ContentRow> }[] = [];
        let created: Handle<ContentRow> | undefined;
        const restrictTo = ctx.principal.allowedModels ? [...ctx.models.keys()] : null;
        const build = (stored: ReadonlyMap<string, string>) => {
          const steps: WriteStep[] = [];
          for (const [i, op] of ops.entries()) {
            let modelKey = op.modelKey ?? null;
            const missing = () => new NotFound(`operations.${i}: no record with _id "${op._id}"`);
            if (op.action !== 'create') {
              modelKey ??= stored.get(op._id!) ?? null;
              if (!modelKey || !ctx.models.has(modelKey)) throw missing();
            }
            const model = modelKey ? ctx.models.get(modelKey) : undefined;
            if (!model)
              throw new BadUserInput(`operations.${i}.modelKey names no model`, { field: `operations.${i}.modelKey` });
            requireModelScope(ctx, SCOPE_OF[op.action]!, model);
            if (op.action === 'create' || op.action === 'update')
              checkFieldWrites(ctx, model, op.data, { recordId: op._id ?? null });
            const message = `operations.${i}: no record with _id "${op._id}"`;
            let step: WriteStep;
            if (op.action === 'create')
              step = createRecord(w, model, { naturalKey: op.naturalKey, locale: op.locale, data: op.data ?? {} });
            else if (op.action === 'update') step = updateRecord(w, model, op._id!, op.locale, op.data ?? {}, message);
            else if (op.action === 'publish') step = publishRecord(w, model, op._id!, message);
            else if (op.action === 'unpublish') step = unpublishRecord(w, model, op._id!, message);
            else step = deleteRecord(w, model, op._id!, message);
            steps.push(step);
            out.push({ action: op.action, _id: step.recordId, locale: op.locale || ctx.snapshot.defaultLocale });
          }
          // A batch of creates only: one statement that answers with the records, nothing read back.
          if (steps.length > 1 && steps.every((s) => s.created)) {
            const { statement, steps: many } = createMany(
              w,
              steps.map((s) => s.created!),
              { returning: true },
            );
            for (const s of many) tx.write(s);
            created = tx.read<ContentRow>(statement);
            return;
          }
          // Consecutive creates go as one statement (the import's), the rest one by one, in order.
          for (let i = 0; i < steps.length; ) {
            let j = i;
            while (j < steps.length && steps[j]!.created) j++;
            if (j - i > 1) {
              const run = steps.slice(i, j);
              // createMany's steps carry the same ids and each create's file checks.
              const { statement, steps: many } = createMany(
                w,
                run.map((s) => s.created!),
              );
              for (const s of many) tx.write(s);
              tx.follow(statement);
              i = j;
            } else tx.write(steps[i++]!);
          }
          // The records as they stand after every operation, read inside the transaction: one
          // statement per locale asked for.
          const byLocale = new Map<string, string[]>();
          for (const d of out)
            if (d.action !== 'delete') byLocale.set(d.locale, [...(byLocale.get(d.locale) ?? []), d._id]);
          for (const [locale, ids] of byLocale)
            reads.push({ locale, handle: readBack(tx, draftScope(ctx, locale), [...new Set(ids)], restrictTo) });
        };
        const unknown = ops.filter((op) => op.action !== 'create' && !op.modelKey).map((op) => op._id!);
        if (unknown.length === 0) build(new Map());
        else
          tx.prelude = {
            statement: modelKeysOf(ctx.snapshot.id, unknown),
            // biome-ignore lint/suspicious/noThenProperty: a prelude is a plain record read by content/tx.ts, never awaited; `then` is its continuation
            then: (rows) => build(new Map(rows.map((r) => [String(r.id), String(r.model_key)]))),
          };
        const done = await commit(ctx, tx);
        const nodes = new Map<string, ReturnType<typeof node>>();
        if (created) {
          const rows = done.rows(created);
          for (const [i, d] of out.entries())
            nodes.set(`${d.locale}\0${d._id}`, rows[i] ? node(ctx, rows[i]!, draftScope(ctx, d.locale)) : null);
        }
        for (const r of reads) {
          const scope = draftScope(ctx, r.locale);
          for (const row of done.rows(r.handle)) nodes.set(`${r.locale}\0${row.id}`, node(ctx, row, scope));
        }
        return out.map((d) => ({
          action: d.action,
          _id: d._id,
          record: d.action === 'delete' ? null : (nodes.get(`${d.locale}\0${d._id}`) ?? null),
        }));
      },
    },
  };
}
