import type { Subprocess } from 'bun';

/**
 * Waits until a spawned `src/main.ts` prints its "… ready" banner on stdout (spawned with
 * `stdout: 'pipe'`, `stderr: 'pipe'`); fails with what it printed if it exits or takes over `ms`.
 */
export async function waitForReady(proc: Subprocess<'ignore' | 'inherit' | 'pipe', 'pipe', 'pipe'>, ms = 30_000): Promise<void> {
  const reader = proc.stdout.getReader();
  let out = '';
  const end = Date.now() + ms;
  while (!out.includes(' ready')) {
    if (Date.now() > end) throw new Error(`process not ready: ${out}`);
    const { value, done } = await reader.read();
    if (done) throw new Error(`process exited: ${out}${await new Response(proc.stderr).text()}`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
}
