/**
 * Test servers still running, with the test file that started each. A server a test file never
 * stopped lives on until the end of the run, in the runner's process: when the suite's database
 * then goes (the embedded cluster stops at once, a shared server's databases are dropped) its
 * loops meet reset connections between tests. The preload stops any such server first and names
 * the file that left it. The set lives on globalThis so every test file's copy of this module
 * shares it.
 */
const KEY = Symbol.for('svc.test.liveServers');
const live: Map<object, { file: string; stop: () => Promise<void> }> = ((globalThis as Record<symbol, unknown>)[KEY] ??=
  new Map()) as Map<object, { file: string; stop: () => Promise<void> }>;

/** The first test file on the current stack (the caller of a support helper). */
function callerFile(): string {
  for (const line of (new Error().stack ?? '').split('\n')) {
    const m = /(\/[^\s()]+\.test\.ts)/.exec(line);
    if (m) return m[1]!;
  }
  return '(unknown file)';
}

/** Registers a running server; the returned function is called once it has stopped. */
export function trackServer(stop: () => Promise<void>): () => void {
  const token = {};
  live.set(token, { file: callerFile(), stop });
  return () => {
    live.delete(token);
  };
}

/** Stops every server still running; returns the files that left them. */
export async function stopLeakedServers(): Promise<string[]> {
  const files: string[] = [];
  for (const [token, s] of [...live]) {
    files.push(s.file);
    live.delete(token);
    await s.stop().catch((err: unknown) => console.error(`stopping a server left by ${s.file}: ${String(err)}`));
  }
  return files;
}
