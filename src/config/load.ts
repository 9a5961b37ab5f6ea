import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Which config file a folder holds, in lookup order. */
export const CONFIG_FILES = ['svc.config.ts', 'svc.config.json'] as const;

export class ConfigLoadError extends Error {}

export interface LoadedConfig {
  file: string;
  format: 'ts' | 'json';
  config: unknown;
}

const RUNNER = join(import.meta.dir, 'run-config.ts');

export function findConfigFile(dir: string): { file: string; format: 'ts' | 'json' } | null {
  for (const name of CONFIG_FILES) {
    const file = join(dir, name);
    if (existsSync(file)) return { file, format: name.endsWith('.ts') ? 'ts' : 'json' };
  }
  return null;
}

/** `file:line: message` for the first stack frame inside the config file itself. */
function describeThrow(
  file: string,
  out: { message: string; stack: string; position: { line?: number; column?: number } | null },
): string {
  if (out.position?.line) return `${file}:${out.position.line}:${out.position.column ?? 0}: ${out.message}`;
  const escaped = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const frame = new RegExp(`${escaped}:(\\d+)(?::(\\d+))?`).exec(out.stack);
  if (frame) return `${file}:${frame[1]}${frame[2] ? `:${frame[2]}` : ''}: ${out.message}`;
  return `${file}: ${out.message}`;
}

/**
 * Loads the folder's config. A TypeScript config runs in a child Bun process (run-config.ts)
 * that serves `svc/config` as a virtual module, so the import works without node_modules
 * and every load sees the files as they are now.
 */
export async function loadConfig(dir: string): Promise<LoadedConfig> {
  const found = findConfigFile(dir);
  if (!found) throw new ConfigLoadError(`no ${CONFIG_FILES.join(' or ')} in ${dir} (run svc init, or pass --dir)`);
  if (found.format === 'json') {
    try {
      return { ...found, config: JSON.parse(readFileSync(found.file, 'utf8')) };
    } catch (err) {
      throw new ConfigLoadError(`${found.file}: not valid JSON: ${(err as Error).message}`);
    }
  }
  const proc = Bun.spawn([process.execPath, RUNNER, found.file], {
    cwd: dir,
    stdout: 'pipe',
    stderr: 'pipe',
    env: { ...process.env, BUN_BE_BUN: '1' },
  });
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  const line = stdout.trim().split('\n').pop() ?? '';
  let out: {
    ok: boolean;
    config?: unknown;
    message: string;
    stack: string;
    position: { line?: number; column?: number } | null;
  };
  try {
    out = JSON.parse(line);
  } catch {
    const reason = stderr.trim().split('\n').filter(Boolean).pop() ?? `exit code ${proc.exitCode}`;
    throw new ConfigLoadError(`${found.file}: the config did not finish loading: ${reason}`);
  }
  if (!out.ok) throw new ConfigLoadError(describeThrow(found.file, out));
  if (out.config === null)
    throw new ConfigLoadError(`${found.file}: has no default export (export default defineConfig({...}))`);
  return { ...found, config: out.config };
}
