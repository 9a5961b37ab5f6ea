import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLID,
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
import { listFiles, type Owner } from '../../files/list.ts';
import { permanentlyDeleteFile, restoreFile, softDeleteFile } from '../../files/lifecycle.ts';
import { LocalDiskStorage, type FileStorage } from '../../files/storage.ts';
import { derivedPath, fileView, projectFile, type FileRow } from '../../files/store.ts';
import type { GqlContext } from '../context.ts';

/**
 * The Files family (spec "GraphQL families"): `file(id)` (files:read) and `files(...)`
 * (files:list; files:list.all for every customer's uploads). In every key's schema: a key
 * without the scope gets `missing required scope: <scope>` (spec error table; pruning is only
 * for unlisted operations and models, and write fields on public keys). File answers are never put in the shared response cache (uploads change
 * lists at any time and a customer's list is theirs).
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

/** The Service's settings carry baseUrl (GraphqlDeps names only what the core needs). */
function urlBase(ctx: GqlContext): string {
  return (ctx.svc.settings as { baseUrl?: string }).baseUrl ?? '';
}

const view = (row: FileRow, ctx: GqlContext) => fileView(row, urlBase(ctx));

export const FitEnum = new GraphQLEnumType({
  name: 'ImageFit',
  values: { cover: {}, contain: {}, fill: {}, inside: {}, outside: {} },
});
export const FormatEnum = new GraphQLEnumType({
  name: 'ImageFormat',
  values: { webp: {}, avif: {}, png: {}, jpeg: {} },
});

export const FileType = new GraphQLObjectType<FileRow, GqlContext>({
  name: 'File',
  fields: {
    id: { type: nn(GraphQLID) },
    url: {
      type: nn(GraphQLString),
      description: 'The file URL; for images, with arguments, a transformed variant.',
      args: {
        w: { type: GraphQLInt },
        h: { type: GraphQLInt },
        fit: { type: FitEnum },
        format: { type: FormatEnum },
        q: { type: GraphQLInt },
      },
      resolve: (r, a: Record<string, string | number | null | undefined>, ctx) => {
        const q = new URLSearchParams();
        for (const k of ['w', 'h', 'fit', 'format', 'q'])
          if (a[k] !== undefined && a[k] !== null) q.set(k, String(a[k]));
        return q.size ? `${view(r, ctx).url}?${q}` : view(r, ctx).url;
      },
    },
    filename: { type: nn(GraphQLString) },
    contentType: { type: nn(GraphQLString), resolve: (r) => r.content_type },
    size: { type: nn(GraphQLInt), resolve: (r) => Number(r.size) },
    width: { type: GraphQLInt },
    height: { type: GraphQLInt },
    alt: { type: GraphQLString },
    folder: { type: GraphQLString },
    sha256: { type: nn(GraphQLString) },
    createdAt: { type: nn(GraphQLString), resolve: (r) => r.created_at.toISOString() },
    deletedAt: { type: GraphQLString, resolve: (r) => r.deleted_at?.toISOString() ?? null },
    duration: {
      type: GraphQLFloat,
      description: 'Videos: seconds, once the media job probed it.',
      resolve: (r) => r.duration ?? null,
    },
    poster: {
      type: GraphQLString,
      description: 'Videos: a poster image URL, once the media job made it.',
      resolve: (r, _a, ctx) => (r.media?.poster ? urlBase(ctx) + derivedPath(r, r.media.poster) : null),
    },
    hls: {
      type: GraphQLString,
      description: 'Videos: the HLS master playlist URL, once made; null when ffmpeg is not available.',
      resolve: (r, _a, ctx) => (r.media?.hls ? urlBase(ctx) + derivedPath(r, r.media.hls) : null),
    },
  },
});

const FileEdge = new GraphQLObjectType({
  name: 'FileEdge',
  fields: { cursor: { type: nn(GraphQLString) }, node: { type: nn(FileType) } },
});
const FilePageInfo = new GraphQLObjectType({
  name: 'FilePageInfo',
  fields: { hasNextPage: { type: nn(GraphQLBoolean) }, endCursor: { type: GraphQLString } },
});
const FileConnection = new GraphQLObjectType({
  name: 'FileConnection',
  fields: { edges: { type: nn(new GraphQLList(nn(FileEdge))) }, pageInfo: { type: nn(FilePageInfo) } },
});

/** Whose files `files` lists for this caller (issue 17: customers their own, server keys the project's). */
function ownerOf(ctx: GqlContext): Owner {
  if (hasScope(ctx.principal, 'files:list.all')) return { all: true };
  if (ctx.customer) return { customerId: ctx.customer.customerId };
  return isPublicKey(ctx.principal.kind) ? { keysOnly: true } : { all: true };
}

export function fileQueries(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    file: {
      type: FileType,
      args: { id: { type: nn(GraphQLID) } },
      resolve: async (_r, args: { id: string }, ctx) => {
        requireScope(ctx.principal, 'files:read');
        ctx.noStore = true;
        const row = await projectFile(ctx.svc.sql, ctx.principal.projectId, args.id);
        // A customer sees their own uploads (files:list.all sees every file).
        const owner = ownerOf(ctx);
        if (row && 'customerId' in owner && row.customer_id !== owner.customerId) return null;
        return row && !row.deleted_at ? row : null;
      },
    },
    files: {
      type: nn(FileConnection),
      args: {
        first: { type: GraphQLInt },
        after: { type: GraphQLString },
        folder: { type: GraphQLString },
        contentType: { type: GraphQLString },
      },
      resolve: (_r, args, ctx) => {
        if (!hasScope(ctx.principal, 'files:list.all')) requireScope(ctx.principal, 'files:list');
        ctx.noStore = true;
        return listFiles(ctx.svc.sql, ctx.principal.projectId, ownerOf(ctx), args);
      },
    },
  };
}

function storageOf(ctx: GqlContext): FileStorage {
  if (ctx.svc.files) return ctx.svc.files.storage;
  return new LocalDiskStorage((ctx.svc.settings as { dataDir?: string }).dataDir ?? '.svc');
}

/** deleteFile (soft), restoreFile, permanentlyDeleteFile: files:delete, secret keys only. */
export function fileMutations(principal: KeyPrincipal): GraphQLFieldConfigMap<unknown, GqlContext> {
  // Write fields are absent from a public key's schema; a secret key without files:delete is told so.
  if (isPublicKey(principal.kind)) return {};
  const idArg = { id: { type: nn(GraphQLID) } };
  // A customer's token limits these to the customer's own uploads (files:list.all lifts it).
  const who = (ctx: GqlContext) => {
    const o = ownerOf(ctx);
    return 'customerId' in o ? o.customerId : null;
  };
  const may = (ctx: GqlContext) => requireScope(ctx.principal, 'files:delete');
  const changed = async <T>(ctx: GqlContext, id: string, v: T): Promise<T> => {
    await ctx.svc.bus.publish({
      type: 'custom',
      topic: 'files.changed',
      projectId: ctx.principal.projectId,
      data: { fileId: id },
    });
    return v;
  };
  return {
    deleteFile: {
      type: nn(FileType),
      args: idArg,
      resolve: async (_r, a: { id: string }, ctx) => (
        may(ctx), changed(ctx, a.id, await softDeleteFile(ctx.svc.sql, ctx.principal.projectId, a.id, who(ctx)))
      ),
    },
    restoreFile: {
      type: nn(FileType),
      args: idArg,
      resolve: async (_r, a: { id: string }, ctx) => (
        may(ctx), changed(ctx, a.id, await restoreFile(ctx.svc.sql, ctx.principal.projectId, a.id, who(ctx)))
      ),
    },
    permanentlyDeleteFile: {
      type: nn(GraphQLBoolean),
      args: idArg,
      resolve: async (_r, a: { id: string }, ctx) => (
        may(ctx),
        changed(
          ctx,
          a.id,
          await permanentlyDeleteFile(ctx.svc.sql, storageOf(ctx), ctx.principal.projectId, a.id, who(ctx)),
        )
      ),
    },
  };
}
