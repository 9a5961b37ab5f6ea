import { GraphQLNonNull, GraphQLString, type GraphQLFieldConfigMap } from 'graphql';
import { NotFound } from '../../errors.ts';
import { parseRoomName } from '../../collab/protocol.ts';
import type { GqlContext } from '../context.ts';
import type { TypeFactory } from '../model-types.ts';
import { draftNode, requireModelScope } from '../resolvers.ts';

/**
 * `saveCollabDraft(roomName)`: writes a collaboration room's document into the record's working
 * version (versioned models keep live edits out of the record until this; `publish<Model>Version`
 * then publishes them). Needs records:write on the room's model, like update<Model>.
 */
export function collabMutations(types: TypeFactory): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    saveCollabDraft: {
      type: new GraphQLNonNull(types.recordInterface),
      args: { roomName: { type: new GraphQLNonNull(GraphQLString) } },
      resolve: async (_r, args: { roomName: string }, ctx) => {
        const room = parseRoomName(args.roomName);
        const model = room ? ctx.models.get(room.modelKey) : undefined;
        if (!room || !model) throw new NotFound(`No room "${args.roomName}"`);
        requireModelScope(ctx, 'records:write', model);
        ctx.noStore = true;
        if (!ctx.svc.collab) throw new NotFound(`No room "${args.roomName}"`);
        // The room's save logs itself in its transaction (src/collab/room-persist.ts).
        ctx.audited = true;
        await ctx.svc.collab.saveDraft(ctx.snapshot.id, args.roomName, ctx.principal.keyId);
        const node = await draftNode(ctx, room.recordId, room.variantId === 'default' ? null : room.variantId);
        if (!node) throw new NotFound(`No record with _id "${room.recordId}"`);
        return node;
      },
    },
  };
}
