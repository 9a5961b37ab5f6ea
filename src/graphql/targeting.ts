import { GraphQLInputObjectType, GraphQLList, GraphQLNonNull, GraphQLString } from 'graphql';
import { BadUserInput } from '../errors.ts';
import { ANONYMOUS, segmentsOf, targeting, VARIANT_ID_RE, DEFAULT_VARIANT, type Targeting } from '../content/targeting.ts';
import { identityOf } from '../identity/identity.ts';
import { segmentSubject, type Profile } from '../identity/profiles.ts';
import type { GqlContext } from './context.ts';

/**
 * The targeting context of a read (spec "Customer JWT" 5): key only is the anonymous baseline
 * (`authStatus` ""); key plus token is that customer (`"authenticated"`, and the segments
 * their profile attributes fall in). Resolved once per request, on the first read that needs
 * it; the profile comes from the process' profile cache (identity/profiles.ts).
 *
 * Secret keys may pass `context` on a read instead (server-side rendering for a customer the
 * server knows, or an editor's preview of a variant): a public key cannot, since a browser
 * could then claim any segment.
 */
export const ReadContextInput = new GraphQLInputObjectType({
  name: 'ReadContextInput',
  description: 'Secret keys only: read as this targeting context instead of the request\'s own.',
  fields: {
    authStatus: { type: GraphQLString, description: '"" (anonymous, the default) or "authenticated".' },
    segments: { type: new GraphQLList(new GraphQLNonNull(GraphQLString)), description: 'Segment keys the reader is in.' },
    variantId: { type: GraphQLString, description: 'Show this variant (or "default") whatever the rules say.' },
  },
});

export interface ReadContextArg {
  authStatus?: string | null;
  segments?: string[] | null;
  variantId?: string | null;
}

/** Per profile and segment list (a snapshot's): the profile's segment keys. */
const memo = new WeakMap<Profile, { segments: readonly unknown[]; keys: string[] }>();

export function segmentKeysOf(ctx: GqlContext, profile: Profile): string[] {
  const defs = ctx.snapshot.segments;
  const hit = memo.get(profile);
  if (hit && hit.segments === defs) return hit.keys;
  const keys = segmentsOf(defs, segmentSubject(profile));
  memo.set(profile, { segments: defs, keys });
  return keys;
}

async function customerTargeting(ctx: GqlContext): Promise<Targeting> {
  const c = ctx.customer!;
  const profile = await identityOf(ctx.svc.bus).profiles.get(ctx.snapshot.id, c.customerId);
  return targeting('authenticated', profile ? segmentKeysOf(ctx, profile) : []);
}

function fromArgument(arg: ReadContextArg): Targeting {
  const status = arg.authStatus ?? '';
  if (status !== '' && status !== 'authenticated') throw new BadUserInput('context.authStatus must be "" or "authenticated"', { field: 'context.authStatus' });
  const segments = arg.segments ?? [];
  if (segments.length > 100 || segments.some((s) => s.length === 0 || s.length > 100)) throw new BadUserInput('context.segments must hold at most 100 segment keys', { field: 'context.segments' });
  const v = arg.variantId ?? null;
  if (v !== null && v !== DEFAULT_VARIANT && !VARIANT_ID_RE.test(v)) throw new BadUserInput('context.variantId is not a variant id', { field: 'context.variantId' });
  return targeting(status, segments, v);
}

/** The targeting context of one read field: its `context` argument, else the request's. */
export function targetingFor(ctx: GqlContext, arg: ReadContextArg | null | undefined): Targeting | Promise<Targeting> {
  if (arg) return fromArgument(arg);
  if (!ctx.customer) return ANONYMOUS;
  return (ctx.targeting ??= customerTargeting(ctx));
}
