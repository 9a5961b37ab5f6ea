import { availableParallelism } from 'node:os';
import { RateLimited } from '../errors.ts';
import type { HashJob } from './hasher-worker.ts';

/**
 * Password hashing: argon2id (`Bun.password`) with OWASP's parameters (Password Storage Cheat
 * Sheet: 19 MiB, 2 iterations, parallelism 1) rather than Bun's default 64 MiB, which measured
 * ~155 ms of CPU per verify on the 2-core box (20 logins per second wanted 3 cores); these cost
 * ~43 ms.
 *
 * Logins are deliberately slow but must not hold up other requests. Hashing runs on its own
 * worker threads (hasher-worker.ts), each at a lower scheduling priority (nice 10), so the
 * request thread wins the CPU whenever both want it — on Linux the threads of a process share
 * one scheduling group, so an equal-priority hashing thread would halve the request thread's
 * share (measured: event-loop lag p50 0.1 ms → 3.6 ms with one hash running; 0.1 ms niced).
 * One thread per core (they only take what requests leave); at most 256 jobs wait, past that
 * a login or registration answers RATE_LIMITED with `Retry-After: 1` instead of queueing
 * without bound. Hashes made with other parameters (older accounts) still verify.
 */
export const ARGON2 = { algorithm: 'argon2id', memoryCost: 19_456, timeCost: 2 } as const;
/** One per core: they yield to the request thread, so they only use what requests leave. */
const THREADS = Math.max(1, availableParallelism());
const MAX_WAITING = 256;

interface Pending {
  op: HashJob['op'];
  resolve(v: string | boolean): void;
  reject(e: Error): void;
}

interface Slot {
  worker: Worker;
  busy: boolean;
  pending: Map<number, Pending>;
}

const slots: Slot[] = [];
const queue: { job: Omit<HashJob, 'id'>; p: Pending }[] = [];
let nextId = 0;

function startSlot(): Slot {
  const worker = new Worker(new URL('./hasher-worker.ts', import.meta.url));
  // Never the reason a process stays alive.
  worker.unref();
  const slot: Slot = { worker, busy: false, pending: new Map() };
  worker.onmessage = (e: MessageEvent<{ id: number; result?: string | boolean; error?: string }>) => {
    const p = slot.pending.get(e.data.id);
    slot.pending.delete(e.data.id);
    slot.busy = false;
    if (p) {
      // A stored hash that is not one fails the verify; any other error is the hasher's.
      if (e.data.error === undefined) p.resolve(e.data.result!);
      else if (p.op === 'verify') p.resolve(false);
      else p.reject(new Error(`password hashing failed: ${e.data.error}`));
    }
    pump();
  };
  worker.onerror = (e) => {
    // The thread died: fail what it held, replace it on the next job.
    for (const p of slot.pending.values()) p.reject(new Error(`password hasher failed: ${e.message}`));
    slot.pending.clear();
    slots.splice(slots.indexOf(slot), 1);
    worker.terminate();
    pump();
  };
  slots.push(slot);
  return slot;
}

function pump(): void {
  while (queue.length) {
    let slot = slots.find((s) => !s.busy);
    if (!slot && slots.length < THREADS) slot = startSlot();
    if (!slot) return;
    const { job, p } = queue.shift()!;
    const id = ++nextId;
    slot.busy = true;
    slot.pending.set(id, p);
    slot.worker.postMessage({ ...job, id });
  }
}

function submit(job: Omit<HashJob, 'id'>): Promise<string | boolean> {
  if (queue.length >= MAX_WAITING)
    return Promise.reject(
      new RateLimited('Too many logins at once; try again in a moment', undefined, { 'retry-after': '1' }),
    );
  return new Promise((resolve, reject) => {
    queue.push({ job, p: { op: job.op, resolve, reject } });
    pump();
  });
}

export async function hashPassword(password: string): Promise<string> {
  return (await submit({ op: 'hash', password, options: ARGON2 })) as string;
}

/** False for a wrong password and for a stored hash that is not one. */
export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  return (await submit({ op: 'verify', password, hash, options: ARGON2 })) as boolean;
}
