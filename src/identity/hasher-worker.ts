/**
 * The password hasher thread (src/identity/passwords.ts starts it as a Worker): lowers its own
 * scheduling priority (nice 10, this thread only: Linux applies setpriority to a thread id), then
 * hashes and verifies with argon2id synchronously on this thread, one job at a time. Nothing of
 * the service runs here, so a slow hash never holds up a request: the request thread keeps
 * priority over it whenever both want the CPU.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

declare const self: Worker;

export interface HashJob {
  id: number;
  op: 'hash' | 'verify';
  password: string;
  hash?: string;
  options: { algorithm: 'argon2id'; memoryCost: number; timeCost: number };
}

try {
  // /proc/thread-self names this thread (Linux); elsewhere the thread keeps normal priority.
  const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  if (Number.isInteger(tid) && tid > 0) setPriority(tid, 10);
} catch {
  // not Linux, or no /proc: fine
}

self.onmessage = (e: MessageEvent<HashJob>) => {
  const j = e.data;
  try {
    const result =
      j.op === 'hash' ? Bun.password.hashSync(j.password, j.options) : Bun.password.verifySync(j.password, j.hash!);
    self.postMessage({ id: j.id, result });
  } catch (err) {
    // A malformed stored hash: the caller treats it as a failed verify.
    self.postMessage({ id: j.id, error: (err as Error).message });
  }
};
