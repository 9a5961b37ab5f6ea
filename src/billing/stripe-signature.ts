import { sign, verify } from '../crypto/hmac.ts';

/**
 * Stripe's webhook signature scheme (https://docs.stripe.com/webhooks/signature), no I/O:
 * `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">[,v1=…][,v0=…]`,
 * keyed with the endpoint's signing secret (`whsec_…`, used as is). Any `v1` matching any of the
 * configured secrets passes (Stripe sends one per active secret while a secret is rolled); the
 * timestamp must be within `toleranceSec` of now, in either direction.
 */
export const DEFAULT_TOLERANCE_SEC = 300;

export interface SignatureHeader {
  t: number;
  v1: string[];
}

export type SignatureProblem = 'missing' | 'malformed' | 'no_v1' | 'stale' | 'mismatch';

export class SignatureError extends Error {
  constructor(
    readonly problem: SignatureProblem,
    message: string,
  ) {
    super(message);
  }
}

/** Parses the header; throws SignatureError for a missing or malformed one. */
export function parseSignatureHeader(header: string | null | undefined): SignatureHeader {
  if (!header || header.trim() === '') throw new SignatureError('missing', 'the Stripe-Signature header is missing');
  if (header.length > 4096) throw new SignatureError('malformed', 'the Stripe-Signature header is too long');
  let t: number | null = null;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (k === 't' && /^\d{1,12}$/.test(v)) t = Number(v);
    else if (k === 'v1' && /^[0-9a-f]{64}$/i.test(v)) v1.push(v.toLowerCase());
  }
  if (t === null) throw new SignatureError('malformed', 'the Stripe-Signature header has no timestamp (t=…)');
  if (v1.length === 0) throw new SignatureError('no_v1', 'the Stripe-Signature header has no v1 signature');
  return { t, v1 };
}

/** The v1 signature of a body at a time, as Stripe computes it. */
export function signPayload(secret: string, t: number, rawBody: string | Uint8Array): string {
  return sign(secret, [`${t}.`, rawBody], 'hex');
}

/** Throws SignatureError unless `header` signs `rawBody` with one of `secrets` within the tolerance. */
export function verifySignature(
  rawBody: string | Uint8Array,
  header: string | null | undefined,
  secrets: readonly string[],
  nowSec: number,
  toleranceSec = DEFAULT_TOLERANCE_SEC,
): SignatureHeader {
  const parsed = parseSignatureHeader(header);
  const ok = parsed.v1.some((sig) => verify(secrets, [`${parsed.t}.`, rawBody], sig, 'hex'));
  if (!ok) throw new SignatureError('mismatch', 'no v1 signature matches the body and the signing secret');
  // Checked after the signature, like Stripe's own library: an attacker learns nothing from it.
  if (Math.abs(nowSec - parsed.t) > toleranceSec)
    throw new SignatureError('stale', `the signature timestamp is more than ${toleranceSec} seconds from now`);
  return parsed;
}
