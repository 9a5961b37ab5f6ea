import {
  GraphQLID,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
} from 'graphql';
import type { KeyPrincipal } from '../../auth/principal.ts';
import { requireScope } from '../../auth/scopes.ts';
import { isPublicKey } from '../../auth/principal.ts';
import { InternalError } from '../../errors.ts';
import { confirmUpload, createUpload } from '../../files/signed.ts';
import type { FilesRuntime } from '../../files/runtime.ts';
import { FileType } from './files.ts';
import { JSONScalar } from '../scalars.ts';
import type { GqlContext } from '../context.ts';

/**
 * The two-step upload of the Files family (files:write): `createFileUpload` answers where to PUT
 * the bytes (a signed, single-use, size-bound URL that expires), `confirmFileUpload` turns them
 * into the File. A customer's token makes the customer the owner; only they may confirm it.
 */
const nn = <
  T extends GraphQLObjectType | typeof GraphQLString | typeof GraphQLID | typeof GraphQLInt | typeof JSONScalar,
>(
  t: T,
) => new GraphQLNonNull(t);

const FileUpload = new GraphQLObjectType({
  name: 'FileUpload',
  fields: {
    fileId: { type: nn(GraphQLID), description: 'The id the file will have; pass it to confirmFileUpload.' },
    uploadUrl: { type: nn(GraphQLString), description: 'Send the bytes here, once, before expiresAt.' },
    method: { type: nn(GraphQLString), description: 'PUT.' },
    headers: { type: nn(JSONScalar), description: 'Headers to send with the bytes (content-type).' },
    expiresAt: { type: nn(GraphQLString) },
  },
});

function runtime(ctx: GqlContext): FilesRuntime {
  if (!ctx.svc.files) throw new InternalError('files are not served by this process');
  return ctx.svc.files;
}

const baseOf = (ctx: GqlContext) => (ctx.svc.settings as { baseUrl?: string }).baseUrl ?? '';

export function fileUploadMutations(principal: KeyPrincipal): GraphQLFieldConfigMap<unknown, GqlContext> {
  // Write fields are absent from a public key's schema; a secret key without files:write is told so.
  if (isPublicKey(principal.kind)) return {};
  return {
    createFileUpload: {
      type: nn(FileUpload),
      args: {
        filename: { type: nn(GraphQLString) },
        contentType: { type: nn(GraphQLString) },
        size: { type: nn(GraphQLInt), description: 'Bytes; the upload may not differ.' },
        alt: { type: GraphQLString },
        folder: { type: GraphQLString },
      },
      resolve: (
        _r,
        args: { filename: string; contentType: string; size: number; alt?: string | null; folder?: string | null },
        ctx,
      ) => {
        requireScope(ctx.principal, 'files:write');
        ctx.noStore = true;
        return createUpload(
          runtime(ctx).signedDeps,
          ctx.principal,
          ctx.customer?.customerId ?? null,
          args,
          baseOf(ctx),
        );
      },
    },
    confirmFileUpload: {
      type: nn(FileType),
      args: { fileId: { type: nn(GraphQLID) } },
      resolve: (_r, args: { fileId: string }, ctx) => {
        requireScope(ctx.principal, 'files:write');
        ctx.noStore = true;
        return confirmUpload(runtime(ctx).signedDeps, ctx.principal, ctx.customer?.customerId ?? null, args.fileId);
      },
    },
  };
}
