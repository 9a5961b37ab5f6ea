import { GraphQLInputObjectType, GraphQLList, GraphQLNonNull, GraphQLString } from 'graphql';
import { BadUserInput } from '../errors.ts';
import {
  ANONYMOUS,
  segmentsOf,
  targeting,
  VARIANT_ID_RE,
  DEFAULT_VARIANT,
  type Targeting,
} from '../content/targeting.ts';
import { identityOf, type Identity } from '../identity/identity.ts';
import type { ProjectSnapshot } from '../projects/actor.ts';
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
  description: "Secret keys only: read as this targeting context instead of the request's own.",
  fields: {
    authStatus: { type: GraphQLString, description: '"" (anonymous, the default) or "authenticated".' },
    segments: {
      type: new GraphQLList(new GraphQLNonNull(GraphQLString)),
      description: 'Segment keys the reader is in.',
    },
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

/**
 * The targeting context derived from one token, kept with the token's cache entry
 * (identity/tokens.ts `memo`, bytes counted there): reused while the project's segment
 * definitions are the same array (a push reloads the snapshot) and no cached profile has
 * changed since (`profiles.generation`; any customer's change recomputes it, from the profile
 * cache, without a query).
 */
interface TokenTargeting {
  targeting: Targeting;
  segments: ProjectSnapshot['segments'];
  generation: number;
}

/** Contexts longer than this (thousands of segments) are recomputed per request, not memoised. */
const MAX_MEMO_KEY = 4096;

async function customerTargeting(ctx: GqlContext, identity: Identity): Promise<Targeting> {
  const c = ctx.customer!;
  const generation = identity.profiles.generation;
  const segments = ctx.snapshot.segments;
  const profile = await identity.profiles.get(ctx.snapshot.id, c.customerId);
  const t = targeting('authenticated', profile ? segmentKeysOf(ctx, profile) : []);
  if (t.key.length <= MAX_MEMO_KEY)
    identity.tokens.setMemo(c, { targeting: t, segments, generation } satisfies TokenTargeting, 256 + 2 * t.key.length);
  return t;
}

function fromArgument(arg: ReadContextArg): Targeting {
  const status = arg.authStatus ?? '';
  if (status !== '' && status !== 'authenticated')
    throw new BadUserInput('context.authStatus must be "" or "authenticated"', { field: 'context.authStatus' });
  const segments = arg.segments ?? [];
  if (segments.length > 100 || segments.some((s) => s.length === 0 || s.length > 100))
    throw new BadUserInput('context.segments must hold at most 100 segment keys', { field: 'context.segments' });
  const v = arg.variantId ?? null;
  if (v !== null && v !== DEFAULT_VARIANT && !VARIANT_ID_RE.test(v))
    throw new BadUserInput('context.variantId is not a variant id', { field: 'context.variantId' });
  return targeting(status, segments, v);
}

/** The targeting context of one read field: its `context` argument, else the request's. */
export function targetingFor(ctx: GqlContext, arg: ReadContextArg | null | undefined): Targeting | Promise<Targeting> {
  if (arg) return fromArgument(arg);
  const c = ctx.customer;
  if (!c) return ANONYMOUS;
  if (ctx.targeting) return ctx.targeting;
  const identity = identityOf(ctx.svc.bus);
  const memo = identity.tokens.memo<TokenTargeting>(c);
  if (memo && memo.segments === ctx.snapshot.segments && memo.generation === identity.profiles.generation)
    return (ctx.targeting = memo.targeting);
  return (ctx.targeting = customerTargeting(ctx, identity));
}
