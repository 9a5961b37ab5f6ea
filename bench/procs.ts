import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, fstatSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

/**
 * Every process the harness starts goes through `startChild`, so that a normal end, an error
 * and Ctrl-C all stop exactly those processes (by pid, never by name).
 */
const children = new Set<ChildProcess>();

export interface Child {
  proc: ChildProcess;
  pid: number;
  /** The last lines the child printed (stdout and stderr), for error messages. */
  tail(): string;
  exited(): boolean;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

/**
 * `logFile`: the child's stdout and stderr go to that file instead of a pipe to this process.
 * For the service under load: its request log is ~5 MB/s at 40,000 requests/s, and a pipe to the
 * harness made the service wait on (and the harness wake for) every chunk, on the cores the
 * measured processes share; a file costs the service one write per batch of lines and the harness
 * nothing (read once, for an error message). The references print no such log.
 */
export function startChild(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; label: string; logFile?: string },
): Child {
  const fd = opts.logFile ? openSync(opts.logFile, 'a') : undefined;
  const proc = spawn(cmd, args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', fd ?? 'pipe', fd ?? 'pipe'],
  });
  if (fd !== undefined) closeSync(fd);
  children.add(proc);
  let log = '';
  const keep = (c: Buffer) => {
    log = (log + c.toString()).slice(-16_000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const fileTail = (file: string): string => {
    try {
      const f = openSync(file, 'r');
      try {
        const size = fstatSync(f).size;
        const n = Math.min(size, 16_000);
        const buf = Buffer.alloc(n);
        readSync(f, buf, 0, n, size - n);
        return buf.toString();
      } finally {
        closeSync(f);
      }
    } catch {
      return '';
    }
  };
  proc.on('error', (err) => keep(Buffer.from(`\n${opts.label}: ${err.message}\n`)));
  let done = false;
  const exit = new Promise<void>((r) =>
    proc.once('exit', () => {
      done = true;
      children.delete(proc);
      r();
    }),
  );
  return {
    proc,
    pid: proc.pid ?? -1,
    tail: () => (opts.logFile ? fileTail(opts.logFile) : log).trim().split('\n').slice(-6).join('\n'),
    exited: () => done,
    async stop(signal = 'SIGINT', graceMs = 10_000) {
      if (done) return;
      proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(t);
    },
  };
}

/** A bench script (a path under bench/) in its own child process, its input a JSON file named on its command line. */
export function startScript(script: string, input: unknown, label: string): Child {
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), `${label}.json`);
  writeFileSync(file, JSON.stringify(input));
  return startChild(process.execPath, [join(import.meta.dir, script), file], {
    label,
    cwd: join(import.meta.dir, '..'),
  });
}

/**
 * What a bench script started as `child` prints as one line `<marker> {json}`, read once the child
 * has exited (SIGKILL after timeoutMs); undefined when it printed none (child.tail() says why).
 */
export async function childResult<T>(child: Child, marker: string, timeoutMs: number): Promise<T | undefined> {
  let out = '';
  child.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void child.stop('SIGKILL', 0), timeoutMs);
  await new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
  clearTimeout(timer);
  const m = new RegExp(`${marker} (\\{.*\\})`).exec(out);
  return m ? (JSON.parse(m[1]!) as T) : undefined;
}

/** Stops every live child (SIGTERM, then SIGKILL after a grace period). */
export async function stopAll(graceMs = 5_000): Promise<void> {
  const live = [...children];
  await Promise.all(
    live.map(
      (p) =>
        new Promise<void>((r) => {
          if (p.exitCode !== null || p.signalCode !== null) return r();
          p.once('exit', () => r());
          p.kill('SIGTERM');
          setTimeout(() => {
            p.kill('SIGKILL');
            r();
          }, graceMs).unref();
        }),
    ),
  );
}

/** Last resort on exit: whatever is still running gets SIGKILL synchronously. */
export function killAllNow(): void {
  for (const p of children) p.kill('SIGKILL');
}

/** Resolves when nothing listens on 127.0.0.1:port; rejects with one line otherwise. */
export async function assertPortFree(port: number, what: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          err.code === 'EADDRINUSE' ? `port ${port} (${what}) is in use` : `port ${port} (${what}): ${err.message}`,
        ),
      ),
    );
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve()));
  });
}

/** Polls `url` until it answers (any status) or the child exits or time runs out. */
export async function waitHttp(url: string, child: Child, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exited()) throw new Error(`exited before listening: ${child.tail() || '(no output)'}`);
    try {
      await fetch(url, { signal: AbortSignal.timeout(1_000) });
      return;
    } catch {
      await Bun.sleep(100);
    }
  }
  throw new Error(`did not answer ${url} within ${timeoutMs / 1000} s: ${child.tail()}`);
}

function statusKb(pid: number, field: string): number | undefined {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Peak resident memory of one process over a window. Resets the kernel's high-water mark
 * (`echo 5 > /proc/pid/clear_refs`) at the start where allowed, reads VmHWM at the end, and
 * also samples VmRSS every 100 ms as a fallback; reports the larger, in MB.
 */
export function rssWindow(pid: number): { end(): number | undefined } {
  let reset = false;
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    reset = true;
  } catch {
    reset = false;
  }
  let max = statusKb(pid, 'VmRSS') ?? 0;
  const timer = setInterval(() => {
    max = Math.max(max, statusKb(pid, 'VmRSS') ?? 0);
  }, 100);
  return {
    end() {
      clearInterval(timer);
      const hwm = reset ? (statusKb(pid, 'VmHWM') ?? 0) : 0;
      const kb = Math.max(max, hwm);
      return kb > 0 ? kb / 1024 : undefined;
    },
  };
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on every Linux we run on). */
const CLK_TCK = 100;

function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/**
 * CPU time (user + system, every thread) one process spends over a window, and the average
 * number of cores it kept busy; undefined where /proc is not available.
 */
export function cpuWindow(pid: number): { end(): { cpuSeconds: number; cores: number } | undefined } {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  return {
    end() {
      const c1 = cpuSeconds(pid);
      const wall = (performance.now() - t0) / 1000;
      if (c0 === undefined || c1 === undefined || wall <= 0) return undefined;
      return { cpuSeconds: c1 - c0, cores: (c1 - c0) / wall };
    },
  };
}
