import {
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import { Conflict } from '../../errors.ts';
import { checkImport, createMany, existingKeys, type ImportInput } from '../../content/import.ts';
import type { GqlContext } from '../context.ts';
import { JSONScalar } from '../scalars.ts';
import { checkLocale, requireModelScope } from '../resolvers.ts';
import { checkFieldWrites } from '../../content/field-access.ts';
import { commit, newTx, writeContext } from '../writes.ts';

/**
 * `importRecords(records)`: creates up to 500 records in one transaction and one statement,
 * skipping natural keys that exist (so an import can run again after an interruption). The
 * bulk path of `svc records import` (docs/graphql.md "Bulk import"). Needs records:write on
 * every model it writes.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

export function importMutation(): GraphQLFieldConfigMap<unknown, GqlContext> {
  const input = new GraphQLInputObjectType({
    name: 'ImportRecordInput',
    fields: {
      modelKey: { type: nn(GraphQLString) },
      naturalKey: { type: nn(GraphQLString) },
      locale: { type: GraphQLString },
      data: { type: JSONScalar },
    },
  });
  const result = new GraphQLObjectType({
    name: 'ImportRecordsResult',
    fields: { created: { type: nn(GraphQLInt) }, skipped: { type: nn(GraphQLInt) } },
  });
  return {
    importRecords: {
      type: nn(result),
      args: { records: { type: nn(new GraphQLList(nn(input))) } },
      resolve: async (_r, args: { records: ImportInput[] }, ctx) => {
        const w = writeContext(ctx);
        const checked = checkImport(w, (k) => ctx.models.get(k), args.records, w.models);
        for (const [i, c] of checked.entries()) {
          requireModelScope(ctx, 'records:write', c.model);
          if (c.input?.locale !== undefined && c.input.locale !== null)
            checkLocale(ctx, c.input.locale, `records.${i}.locale`);
          checkFieldWrites(ctx, c.model, c.input?.data, { recordId: null });
        }
        const tx = newTx(ctx);
        let created = 0;
        if (checked.length > 0) {
          tx.prelude = {
            statement: existingKeys(ctx.snapshot.id, args.records),
            // biome-ignore lint/suspicious/noThenProperty: a prelude is a plain record read by content/tx.ts, never awaited; `then` is its continuation
            then: (rows) => {
              const have = new Set(rows.map((r) => `${r.model_key}\0${r.natural_key}`));
              const fresh = checked.filter((c) => !have.has(`${c.model.key}\0${c.naturalKey}`));
              created = fresh.length;
              if (fresh.length === 0) return;
              const { statement, steps } = createMany(w, fresh);
              for (const s of steps) tx.write(s);
              tx.follow({
                ...statement,
                // Another import created one of these keys meanwhile: running it again skips it.
                mapError: (err) =>
                  err.code === '23505' && err.constraint === 'records_natural_key'
                    ? new Conflict(
                        'A record with one of these natural keys was created meanwhile; run the import again to skip it',
                      )
                    : statement.mapError?.(err),
              });
            },
          };
          await commit(ctx, tx);
        }
        return { created, skipped: checked.length - created };
      },
    },
  };
}
