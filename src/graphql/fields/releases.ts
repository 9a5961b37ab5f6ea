import {
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import type { GqlContext } from '../context.ts';
import { DateTimeScalar } from '../scalars.ts';
import { PageInfo } from '../model-shapes.ts';
import { pageSize, requireScope } from '../resolvers.ts';
import { checkCursor } from '../argument-limits.ts';
import {
  addToRelease,
  createRelease,
  discardRelease,
  getRelease,
  listReleases,
  removeFromRelease,
  scheduleRelease,
  type ReleaseView,
} from '../../releases/store.ts';
import { publishRelease, publishTarget } from '../../releases/publish.ts';
import { NotFound } from '../../errors.ts';

/**
 * Releases over GraphQL (CONTRACT §11; src/releases): every field needs `records:publish`, and
 * is in the schema of secret keys that see every model (a release spans models). Reads of
 * records take `release: ID` beside `preview` (graphql/resolvers.ts `targetedScope`).
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

const ReleaseItemType = new GraphQLObjectType({
  name: 'ReleaseItem',
  fields: {
    modelKey: { type: nn(GraphQLString) },
    recordId: { type: nn(GraphQLID) },
    version: {
      type: GraphQLInt,
      description:
        "The pinned version (recordVersions' numbering); null: the working version when the release goes live.",
    },
  },
});

export const ReleaseType = new GraphQLObjectType<ReleaseView>({
  name: 'Release',
  fields: {
    id: { type: nn(GraphQLID) },
    name: { type: nn(GraphQLString) },
    status: { type: nn(GraphQLString), description: 'open, scheduled, published or discarded.' },
    at: { type: DateTimeScalar, description: 'When it is scheduled to go live (scheduled) or went live (published).' },
    items: { type: nn(new GraphQLList(nn(ReleaseItemType))) },
    error: { type: GraphQLString, description: 'Why the last scheduled publish failed (the release is open again).' },
    createdAt: { type: nn(DateTimeScalar) },
    updatedAt: { type: nn(DateTimeScalar) },
  },
});

const ReleaseConnection = new GraphQLObjectType({
  name: 'ReleaseConnection',
  fields: {
    edges: {
      type: nn(
        new GraphQLList(
          nn(
            new GraphQLObjectType({
              name: 'ReleaseEdge',
              fields: { cursor: { type: nn(GraphQLString) }, node: { type: nn(ReleaseType) } },
            }),
          ),
        ),
      ),
    },
    pageInfo: { type: nn(PageInfo) },
  },
});

const userOf = (ctx: GqlContext): string | null => ctx.customer?.customerId ?? ctx.principal.keyId;

function guard(ctx: GqlContext): void {
  requireScope(ctx, 'records:publish');
  ctx.noStore = true;
}

export function releaseQueries(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    releases: {
      type: nn(ReleaseConnection),
      args: { first: { type: GraphQLInt }, after: { type: GraphQLString } },
      resolve: async (_r, args, ctx) => {
        guard(ctx);
        const page = await listReleases(
          ctx.svc.sql,
          ctx.snapshot.id,
          pageSize(args.first),
          args.after ? checkCursor(args.after) : null,
        );
        return {
          edges: page.releases.map((node, i) => ({
            node,
            cursor:
              i === page.releases.length - 1
                ? page.endCursor
                : Buffer.from(JSON.stringify([node.createdAt.toISOString(), node.id])).toString('base64url'),
          })),
          pageInfo: { hasNextPage: page.hasNextPage, endCursor: page.endCursor },
        };
      },
    },
    release: {
      type: ReleaseType,
      args: { id: { type: nn(GraphQLID) } },
      resolve: (_r, args, ctx) => {
        guard(ctx);
        return getRelease(ctx.svc.sql, ctx.snapshot.id, String(args.id));
      },
    },
  };
}

export function releaseMutations(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    createRelease: {
      type: nn(ReleaseType),
      args: { name: { type: nn(GraphQLString) } },
      resolve: (_r, args, ctx) => {
        guard(ctx);
        return createRelease(ctx.svc.sql, ctx.snapshot.id, args.name, userOf(ctx));
      },
    },
    addToRelease: {
      type: nn(ReleaseType),
      args: {
        releaseId: { type: nn(GraphQLID) },
        modelKey: { type: nn(GraphQLString) },
        recordId: { type: nn(GraphQLID) },
        version: { type: GraphQLInt },
      },
      resolve: (_r, args, ctx) => {
        guard(ctx);
        return addToRelease(ctx.svc.sql, ctx.snapshot.id, ctx.snapshot.defaultLocale, {
          releaseId: args.releaseId,
          model: ctx.models.get(args.modelKey),
          modelKey: args.modelKey,
          recordId: args.recordId,
          version: args.version,
        });
      },
    },
    removeFromRelease: {
      type: nn(ReleaseType),
      args: {
        releaseId: { type: nn(GraphQLID) },
        modelKey: { type: nn(GraphQLString) },
        recordId: { type: nn(GraphQLID) },
      },
      resolve: (_r, args, ctx) => {
        guard(ctx);
        return removeFromRelease(ctx.svc.sql, ctx.snapshot.id, args.releaseId, args.modelKey, args.recordId);
      },
    },
    publishRelease: {
      type: nn(ReleaseType),
      args: { id: { type: nn(GraphQLID) } },
      resolve: async (_r, args, ctx) => {
        guard(ctx);
        const id = String(args.id);
        if (!/^rel_[0-9a-f]{24}$/.test(id)) throw new NotFound(`No release with id "${id.slice(0, 40)}"`);
        await publishRelease(ctx.svc.writes, publishTarget(ctx.snapshot), id, userOf(ctx));
        return (await getRelease(ctx.svc.sql, ctx.snapshot.id, id))!;
      },
    },
    scheduleRelease: {
      type: nn(ReleaseType),
      args: { id: { type: nn(GraphQLID) }, at: { type: nn(DateTimeScalar) } },
      resolve: (_r, args, ctx) => {
        guard(ctx);
        return scheduleRelease(ctx.svc.sql, ctx.snapshot.id, args.id, args.at);
      },
    },
    discardRelease: {
      type: nn(ReleaseType),
      args: { id: { type: nn(GraphQLID) } },
      resolve: (_r, args, ctx) => {
        guard(ctx);
        return discardRelease(ctx.svc.sql, ctx.snapshot.id, args.id);
      },
    },
  };
}
