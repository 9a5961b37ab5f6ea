import { availableParallelism } from 'node:os';
import { RateLimited } from '../errors.ts';

/**
 * Password hashing: argon2id through `Bun.password` (off the event loop), with OWASP's
 * parameters (Password Storage Cheat Sheet: 19 MiB, 2 iterations, parallelism 1) instead of
 * Bun's default 64 MiB. Measured on the 2-core box (bench `login-load`): the default costs
 * ~155 ms of CPU per verify, so 20 logins per second wanted 3 cores; these cost ~43 ms.
 *
 * Logins are deliberately slow but must not starve other requests: at most
 * `availableParallelism() - 1` hashes run at once per process (at least one), so a core stays
 * free for everything else, and at most 256 wait; past that a login or registration answers
 * RATE_LIMITED with `Retry-After: 1` instead of queueing without bound. Hashes made with other
 * parameters (older accounts) still verify: the parameters are part of the hash.
 */
export const ARGON2 = { algorithm: 'argon2id', memoryCost: 19_456, timeCost: 2 } as const;
const SLOTS = Math.max(1, availableParallelism() - 1);
const MAX_WAITING = 256;

let running = 0;
const waiting: (() => void)[] = [];

async function slot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= SLOTS) {
    if (waiting.length >= MAX_WAITING) throw new RateLimited('Too many logins at once; try again in a moment', undefined, { 'retry-after': '1' });
    await new Promise<void>((resolve) => waiting.push(resolve));
  } else running++;
  try {
    return await work();
  } finally {
    // Hand the slot straight to the next waiter (running stays counted), else free it.
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

export function hashPassword(password: string): Promise<string> {
  return slot(() => Bun.password.hash(password, ARGON2));
}

export function verifyPassword(password: string, hash: string): Promise<boolean> {
  return slot(() => Bun.password.verify(password, hash));
}
