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
import { updateAttributes } from '../../identity/profiles.ts';
import { segmentKeysOf } from '../targeting.ts';
import { identityOf } from '../../identity/identity.ts';
import {
  currentCustomer,
  loginCustomer,
  logoutCustomer,
  refreshCustomerToken,
  registerCustomer,
  type ProjectView,
} from '../../identity/accounts.ts';
import { loginCustomerWithOtp, requestCustomerOtp } from '../../identity/customer-otp.ts';

/**
 * Customer auth fields of CONTRACT §8, in the schema of every key kind (public keys included:
 * a storefront logs its customers in with its public key). The types are built once and shared
 * by every generated schema.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

export const CustomerType = new GraphQLObjectType({
  name: 'Customer',
  fields: {
    id: { type: nn(GraphQLID) },
    email: { type: nn(GraphQLString) },
    name: { type: GraphQLString },
    roles: { type: nn(new GraphQLList(nn(GraphQLString))) },
    attributes: {
      type: nn(JSONScalar),
      description: "Profile attributes (set by the project's servers) that segment rules read.",
      resolve: async (c: { id: string }, _a, ctx: GqlContext) =>
        (await identityOf(ctx.svc.bus).profiles.get(ctx.snapshot.id, c.id))?.attributes ?? {},
    },
    segments: {
      type: nn(new GraphQLList(nn(GraphQLString))),
      description: "Keys of the project's active segments this customer is in now.",
      resolve: async (c: { id: string }, _a, ctx: GqlContext) => {
        const profile = await identityOf(ctx.svc.bus).profiles.get(ctx.snapshot.id, c.id);
        return profile ? segmentKeysOf(ctx, profile) : [];
      },
    },
  },
});

const CustomerAuthPayload = new GraphQLObjectType({
  name: 'CustomerAuthPayload',
  fields: {
    accessToken: { type: nn(GraphQLString) },
    refreshToken: { type: nn(GraphQLString) },
    expiresIn: { type: nn(GraphQLInt), description: 'Seconds until the access token expires.' },
    customer: { type: nn(CustomerType) },
  },
});

function project(ctx: GqlContext): ProjectView {
  return { id: ctx.snapshot.id, settings: ctx.snapshot.settings, models: ctx.snapshot.models };
}

export function customerQueries(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    currentUser: {
      type: CustomerType,
      description: 'The customer of the access token sent with the key; null without one.',
      resolve: (_r, _a, ctx) =>
        ctx.customer ? currentCustomer(ctx.svc.sql, project(ctx), ctx.customer.customerId) : null,
    },
  };
}

export function customerMutations(principal: {
  kind: Parameters<typeof isPublicKey>[0];
}): GraphQLFieldConfigMap<unknown, GqlContext> {
  const payload = nn(CustomerAuthPayload);
  const str = nn(GraphQLString);
  const server: GraphQLFieldConfigMap<unknown, GqlContext> = isPublicKey(principal.kind)
    ? {}
    : {
        updateCustomerAttributes: {
          type: nn(CustomerType),
          description:
            'Secret keys with customers:write: sets profile attributes (merged; a null value removes one; merge: false replaces all).',
          args: {
            customerId: { type: nn(GraphQLID) },
            attributes: { type: nn(JSONScalar) },
            merge: { type: GraphQLBoolean, defaultValue: true },
          },
          resolve: async (_r, args, ctx) => {
            requireScope(ctx, 'customers:write');
            ctx.noStore = true;
            const id = identityOf(ctx.svc.bus);
            const p = await updateAttributes(
              id.sql,
              id.bus,
              ctx.snapshot.id,
              String(args.customerId),
              args.attributes,
              args.merge !== false,
            );
            return currentCustomer(ctx.svc.sql, project(ctx), p.customerId);
          },
        },
      };
  return {
    ...server,
    registerCustomer: {
      type: payload,
      args: { email: { type: str }, password: { type: str }, name: { type: GraphQLString } },
      resolve: (_r, args, ctx) => registerCustomer(identityOf(ctx.svc.bus), project(ctx), args),
    },
    loginCustomer: {
      type: payload,
      args: { email: { type: str }, password: { type: str } },
      resolve: (_r, args, ctx) => loginCustomer(identityOf(ctx.svc.bus), project(ctx), args, ctx.clientIp?.() ?? null),
    },
    requestCustomerOtp: {
      type: nn(GraphQLBoolean),
      args: { email: { type: str } },
      resolve: (_r, args, ctx) => requestCustomerOtp(identityOf(ctx.svc.bus), project(ctx), args),
    },
    loginCustomerWithOtp: {
      type: payload,
      args: { email: { type: str }, code: { type: str } },
      resolve: (_r, args, ctx) =>
        loginCustomerWithOtp(identityOf(ctx.svc.bus), project(ctx), args, ctx.clientIp?.() ?? null),
    },
    refreshCustomerToken: {
      type: payload,
      args: { refreshToken: { type: str } },
      resolve: (_r, args, ctx) => refreshCustomerToken(identityOf(ctx.svc.bus), project(ctx), args),
    },
    logoutCustomer: {
      type: nn(GraphQLBoolean),
      args: { refreshToken: { type: GraphQLString } },
      resolve: (_r, args, ctx) => logoutCustomer(identityOf(ctx.svc.bus), ctx.snapshot.id, args, ctx.customer),
    },
  };
}
