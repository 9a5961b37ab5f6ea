import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * HMAC-SHA256, the one place svc signs with a shared key and checks what comes back: operation
 * calls and callbacks, Stripe webhooks, unsubscribe links, one-time code hashes, CSRF tokens, the
 * upstream login's PKCE verifier and nonce. Each caller keeps its own wire format (what is
 * signed, the encoding, the header); this module holds the two things that must not be got
 * wrong eight times: the comparison is constant-time, and a check accepts any key of a
 * keyring, so a key can be rotated (the current key signs, previous ones still verify).
 */
export type HmacKey = string | Uint8Array;
export type Signed = string | Uint8Array;
export type Encoding = 'hex' | 'base64url';

/** The keys a signature is checked against: `current` signs, `previous` only verify. */
export interface Keyring {
  readonly current: HmacKey;
  readonly previous: readonly HmacKey[];
}

/** What a check accepts: one key, a keyring, or a list of keys (any may match). */
export type Keys = HmacKey | Keyring | readonly HmacKey[];

const isKeyring = (k: Keys): k is Keyring => typeof k === 'object' && 'current' in k && 'previous' in k;

/** The keys of `keys`, the signing one first. */
export function keysOf(keys: Keys): readonly HmacKey[] {
  if (typeof keys === 'string' || keys instanceof Uint8Array) return [keys];
  if (isKeyring(keys)) return [keys.current, ...keys.previous];
  return keys;
}

/** The MAC of `data` (its parts fed in order, nothing added between them). */
export function hmac(key: HmacKey, data: Signed | readonly Signed[]): Buffer {
  const h = createHmac('sha256', key);
  for (const part of typeof data === 'string' || data instanceof Uint8Array ? [data] : data) h.update(part);
  return h.digest();
}

/** The MAC of `data` under `key` (a keyring's current key), encoded. */
export function sign(key: HmacKey | Keyring, data: Signed | readonly Signed[], encoding: Encoding): string {
  return hmac(keysOf(key)[0]!, data).toString(encoding);
}

/**
 * Constant-time equality. Inputs of different lengths are unequal at once, which tells a
 * caller only the length (public: every signature of a format has the same one).
 */
export function safeEqual(a: string | Uint8Array, b: string | Uint8Array): boolean {
  const x = typeof a === 'string' ? Buffer.from(a) : a;
  const y = typeof b === 'string' ? Buffer.from(b) : b;
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Whether `signature` is the encoded MAC of `data` under one of `keys`. The signature is
 * compared as the canonical encoding (a non-canonical spelling of the right bytes is refused).
 */
export function verify(keys: Keys, data: Signed | readonly Signed[], signature: string, encoding: Encoding): boolean {
  return keysOf(keys).some((key) => safeEqual(hmac(key, data).toString(encoding), signature));
}
