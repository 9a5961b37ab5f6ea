import {
  GraphQLBoolean,
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
import { JSONScalar } from '../scalars.ts';
import { requireScope } from '../resolvers.ts';
import { isPublicKey } from '../../auth/principal.ts';
import { PermissionDenied, Unauthenticated } from '../../errors.ts';
import { identityOf } from '../../identity/identity.ts';
import {
  listNotifications,
  markRead,
  preferencesOf,
  sendNotification,
  updatePreferences,
} from '../../identity/notifications.ts';

/**
 * Notification fields (spec "Notification and preference"). A customer (key + token) reads
 * their notifications with `notifications:read` and manages preferences with
 * `notifications:write` (from the key or the customer's role); `sendNotification` is for
 * secret keys holding `notifications:write`.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

const NotificationType = new GraphQLObjectType({
  name: 'Notification',
  fields: {
    id: { type: nn(GraphQLID) },
    type: { type: nn(GraphQLString) },
    title: { type: nn(GraphQLString) },
    body: { type: GraphQLString },
    data: { type: JSONScalar },
    read: { type: nn(GraphQLBoolean) },
    readAt: { type: GraphQLString },
    createdAt: { type: nn(GraphQLString) },
  },
});

const PreferencesType = new GraphQLObjectType({
  name: 'NotificationPreferences',
  fields: {
    disabledTypes: {
      type: nn(new GraphQLList(nn(GraphQLString))),
      description: 'Types the customer receives neither in the inbox nor by mail.',
    },
    email: { type: nn(GraphQLBoolean), description: 'Mail a copy of each notification.' },
  },
});

function customerOf(ctx: GqlContext, scope: string): string {
  if (!ctx.customer) throw new Unauthenticated('A customer access token is required');
  requireScope(ctx, scope);
  return ctx.customer.customerId;
}

export function notificationQueries(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    notifications: {
      type: nn(new GraphQLList(nn(NotificationType))),
      args: { first: { type: GraphQLInt }, unreadOnly: { type: GraphQLBoolean } },
      resolve: (_r, args, ctx) =>
        listNotifications(ctx.svc.sql, ctx.snapshot.id, customerOf(ctx, 'notifications:read'), args),
    },
    notificationPreferences: {
      type: nn(PreferencesType),
      resolve: (_r, _a, ctx) => preferencesOf(ctx.svc.sql, ctx.snapshot.id, customerOf(ctx, 'notifications:read')),
    },
  };
}

/** `sendNotification` only in schemas of secret keys (a write field is absent for public keys). */
export function notificationMutations(secretKey: boolean): GraphQLFieldConfigMap<unknown, GqlContext> {
  const fields: GraphQLFieldConfigMap<unknown, GqlContext> = {
    markNotificationRead: {
      type: nn(NotificationType),
      args: { id: { type: nn(GraphQLID) } },
      resolve: (_r, args, ctx) =>
        markRead(ctx.svc.sql, ctx.snapshot.id, customerOf(ctx, 'notifications:read'), args.id),
    },
    updateNotificationPreferences: {
      type: nn(PreferencesType),
      args: { disabledTypes: { type: new GraphQLList(nn(GraphQLString)) }, email: { type: GraphQLBoolean } },
      resolve: (_r, args, ctx) =>
        updatePreferences(ctx.svc.sql, ctx.snapshot.id, customerOf(ctx, 'notifications:write'), args),
    },
    sendNotification: {
      type: NotificationType,
      description: 'Secret keys with notifications:write. Null when the customer disabled this type.',
      args: {
        customerId: { type: nn(GraphQLID) },
        type: { type: nn(GraphQLString) },
        title: { type: nn(GraphQLString) },
        body: { type: GraphQLString },
        data: { type: JSONScalar },
      },
      resolve: (_r, args, ctx) => {
        if (isPublicKey(ctx.principal.kind)) throw new PermissionDenied('Insufficient permissions');
        requireScope(ctx, 'notifications:write');
        return sendNotification(identityOf(ctx.svc.bus), ctx.snapshot.id, args, ctx.snapshot);
      },
    },
  };
  if (!secretKey) delete fields.sendNotification;
  return fields;
}
