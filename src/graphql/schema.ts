import {
  GraphQLBoolean,
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import type { KeyPrincipal } from '../auth/principal.ts';
import type { CustomerGrants } from './grants.ts';
import { isPublicKey } from '../auth/principal.ts';
import { hasScope } from '../auth/scopes.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
import type { ModelDef } from '../projects/types.ts';
import type { GqlContext } from './context.ts';
import { pluralField, typeName, GRAPHQL_NAME } from './context.ts';
import { TypeFactory } from './model-types.ts';
import { JSONScalar, DateTimeScalar } from './scalars.ts';
import { genericRecord, listConnection, searchConnection, singleRead, versions } from './resolvers.ts';
import { modelMutations, batchMutation, customerModelMutations } from './mutations.ts';
import { readerPrincipals } from '../content/field-access.ts';
import { operationFields } from './fields/operations.ts';
import { subscriptionFields } from './subscriptions.ts';
import { customerMutations, customerQueries } from './fields/customers.ts';
import { notificationMutations, notificationQueries } from './fields/notifications.ts';
import { collabMutations } from './fields/collab.ts';
import { importMutation } from './fields/records-import.ts';
import { fileMutations, fileQueries } from './fields/files.ts';
import { ReadContextInput } from './targeting.ts';
import { fileUploadMutations } from './fields/files-uploads.ts';
import { secretMutations, secretQueries } from './fields/secrets.ts';
import {
  semanticMutations,
  semanticQueries,
  semanticSearchArgs,
  semanticSearchConnection,
  wantsSemantic,
} from './fields/semantic-search.ts';
import { projectUiQueries } from './fields/project-ui.ts';
import { releaseMutations, releaseQueries } from './fields/releases.ts';
import { editorialGenericFields, editorialModelMutations } from './fields/editorial.ts';

/**
 * Generates the schema one key sees of one project schema version (CONTRACT §4). What a key
 * cannot use is absent, not merely denied: public keys get no mutations, model-restricted keys
 * see only their models and no generic record fields, `_hasDraft` needs drafts:read.
 */
export interface SchemaView {
  schema: GraphQLSchema;
  /** Models the key may see, by key. */
  models: ReadonlyMap<string, ModelDef>;
}

const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

export function visibleModels(snapshot: ProjectSnapshot, principal: KeyPrincipal): Map<string, ModelDef> {
  const allow = principal.allowedModels ? new Set(principal.allowedModels) : null;
  return new Map(
    snapshot.models.filter((m) => GRAPHQL_NAME.test(m.key) && (!allow || allow.has(m.key))).map((m) => [m.key, m]),
  );
}

/**
 * `grants`: what a customer token's stamped scopes add through a public key (grants.ts
 * `customerGrants`): the models they may write (create and update of their own records, the
 * only record mutations through a public key) and the operations they may execute.
 */
export function buildSchema(
  snapshot: ProjectSnapshot,
  principal: KeyPrincipal,
  grants: CustomerGrants | null = null,
): SchemaView {
  const customerWrites = grants?.writes ?? null;
  const models = visibleModels(snapshot, principal);
  const all = new Map(snapshot.models.map((m) => [m.key, m]));
  const canWrite = !isPublicKey(principal.kind);
  const types = new TypeFactory(
    models,
    all,
    !isPublicKey(principal.kind) && hasScope(principal, 'drafts:read'),
    readerPrincipals(principal),
  );
  const generic = principal.allowedModels === null;

  const query: GraphQLFieldConfigMap<unknown, GqlContext> = {
    _schemaVersion: {
      type: nn(GraphQLInt),
      description: "The project's schema version.",
      resolve: (_r, _a, ctx) => ctx.snapshot.schemaVersion,
    },
  };
  const mutation: GraphQLFieldConfigMap<unknown, GqlContext> = {};
  // Customer auth (CONTRACT §8) is in every key's schema, public keys included.
  Object.assign(query, customerQueries());
  Object.assign(mutation, customerMutations(principal));
  Object.assign(query, notificationQueries());
  Object.assign(mutation, notificationMutations(!isPublicKey(principal.kind)));
  // Secret keys may read as a given targeting context (graphql/targeting.ts); public keys read as themselves.
  const readArgs: GraphQLFieldConfigArgumentMap = isPublicKey(principal.kind)
    ? { locale: { type: GraphQLString }, preview: { type: GraphQLBoolean } }
    : {
        locale: { type: GraphQLString },
        preview: { type: GraphQLBoolean },
        release: { type: GraphQLID },
        context: { type: ReadContextInput },
      };
  const contextArg: GraphQLFieldConfigArgumentMap = isPublicKey(principal.kind)
    ? {}
    : { context: { type: ReadContextInput } };

  for (const model of models.values()) {
    const T = types.recordType(model);
    const conn = types.connection(typeName(model.key), T);
    const lookups = types.inputs.lookupArgs(model);
    const single: GraphQLFieldConfigArgumentMap = { _id: { type: GraphQLID }, naturalKey: { type: GraphQLString } };
    for (const [k, t] of lookups) single[k] = { type: t };
    Object.assign(single, readArgs);
    const lookupKeys = [...lookups.keys()];
    query[model.key] = { type: T, args: single, resolve: (_r, args, ctx) => singleRead(ctx, model, args, lookupKeys) };

    const listArgs: GraphQLFieldConfigArgumentMap = { first: { type: GraphQLInt }, after: { type: GraphQLString } };
    const where = types.inputs.whereType(model);
    if (where) listArgs.where = { type: where };
    const orderBy = types.inputs.orderByType(model);
    if (orderBy) listArgs.orderBy = { type: new GraphQLList(nn(orderBy)) };
    Object.assign(listArgs, readArgs);
    query[pluralField(model.key)] = {
      type: nn(conn),
      args: listArgs,
      resolve: (_r, args, ctx, info) => listConnection(ctx, model, args, info),
    };
    query[`search${typeName(model.key)}s`] = {
      type: nn(conn),
      args: {
        query: { type: nn(GraphQLString) },
        first: { type: GraphQLInt },
        after: { type: GraphQLString },
        locale: { type: GraphQLString },
        ...contextArg,
        ...semanticSearchArgs,
      },
      resolve: (_r, args, ctx) =>
        wantsSemantic(args) ? semanticSearchConnection(ctx, [model], args) : searchConnection(ctx, [model], args),
    };
    if (canWrite) Object.assign(mutation, modelMutations(types, model), editorialModelMutations(types, model));
    else if (customerWrites?.has(model.key)) Object.assign(mutation, customerModelMutations(types, model));
  }
  if (canWrite && models.size > 0) Object.assign(mutation, collabMutations(types));

  if (generic) {
    const recordVersion = new GraphQLObjectType({
      name: 'RecordVersion',
      fields: {
        version: { type: nn(GraphQLInt) },
        action: { type: nn(GraphQLString) },
        locale: { type: GraphQLString },
        variantId: { type: nn(GraphQLString), description: 'The variant written ("default": the default content).' },
        content: { type: JSONScalar },
        userId: { type: GraphQLString },
        userEmail: {
          type: GraphQLString,
          description:
            "The writing member's email: for signed-in members (the Studio) only; null for keys and for API-key writes.",
        },
        createdAt: { type: nn(DateTimeScalar) },
        restoredFrom: {
          type: GraphQLInt,
          description: 'For a "restored" entry: the version whose content it restored.',
        },
      },
    });
    query.record = {
      type: types.recordInterface,
      args: { _id: { type: nn(GraphQLID) }, ...readArgs },
      resolve: (_r, args, ctx) => genericRecord(ctx, args),
    };
    query.records = {
      type: nn(types.recordConnection),
      args: {
        modelKey: { type: nn(GraphQLString) },
        first: { type: GraphQLInt },
        after: { type: GraphQLString },
        ...readArgs,
      },
      resolve: (_r, args, ctx, info) => {
        const model = ctx.models.get(args.modelKey);
        if (!model) return { edges: [], pageInfo: { hasNextPage: false, endCursor: null }, totalCount: 0 };
        return listConnection(ctx, model, args, info);
      },
    };
    query.recordVersions = {
      type: new GraphQLList(nn(recordVersion)),
      args: { _id: { type: nn(GraphQLID) } },
      resolve: (_r, args, ctx) => versions(ctx, args),
    };
    query.searchRecords = {
      type: nn(types.recordConnection),
      args: {
        query: { type: nn(GraphQLString) },
        modelKeys: { type: new GraphQLList(nn(GraphQLString)) },
        first: { type: GraphQLInt },
        after: { type: GraphQLString },
        locale: { type: GraphQLString },
        ...contextArg,
        ...semanticSearchArgs,
      },
      resolve: (_r, args, ctx) => {
        const keys: string[] | null = args.modelKeys ?? null;
        const ms = keys
          ? keys.flatMap((k) => (ctx.models.has(k) ? [ctx.models.get(k)!] : []))
          : [...ctx.models.values()];
        return wantsSemantic(args) ? semanticSearchConnection(ctx, ms, args) : searchConnection(ctx, ms, args);
      },
    };
    if (canWrite) Object.assign(mutation, batchMutation(types), importMutation());
    // Releases span models: secret keys that see every model (graphql/releases.ts).
    if (canWrite) {
      Object.assign(query, releaseQueries());
      Object.assign(mutation, releaseMutations());
      // Restore (generic form), scheduled actions (fields/editorial.ts).
      const editorial = editorialGenericFields(types);
      Object.assign(query, editorial.query);
      Object.assign(mutation, editorial.mutation);
    }
  }

  Object.assign(query, fileQueries());
  Object.assign(mutation, fileMutations(principal), fileUploadMutations(principal));
  Object.assign(query, secretQueries(principal));
  Object.assign(query, semanticQueries(models.size > 0 ? types.recordInterface : null));
  Object.assign(mutation, semanticMutations(principal));
  Object.assign(query, projectUiQueries());
  Object.assign(mutation, secretMutations(principal));
  const ops = operationFields(snapshot, principal, grants);
  Object.assign(query, ops.query);
  Object.assign(mutation, ops.mutation);

  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: query }),
    mutation: Object.keys(mutation).length ? new GraphQLObjectType({ name: 'Mutation', fields: mutation }) : undefined,
    subscription: new GraphQLObjectType({ name: 'Subscription', fields: subscriptionFields() }),
    // Every record type must be reachable for `Record` resolution, even when only linked.
    types: [...models.values()].map((m) => types.recordType(m)),
  });
  return { schema, models };
}
