import { createHash, randomBytes } from 'node:crypto';

/** Random identifiers and secrets: a prefix plus lowercase hex. */
export function newId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomBytes(bytes).toString('hex')}`;
}

/** A secret credential (`ck_…`, `sk_…`): 32 random bytes of hex after the prefix. */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('hex')}`;
}

/**
 * Credentials carry 256 bits of entropy, so a single SHA-256 is enough to make the stored
 * form useless to a reader of the database, and keeps lookup an indexed equality.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}
