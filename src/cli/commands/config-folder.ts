import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from '../client.ts';
import { stringFlag, type CommandContext } from '../command.ts';
import { ConfigLoadError, findConfigFile, loadConfig, type LoadedConfig } from '../../config/load.ts';

/** Shared by the config-folder commands: loading the config and finding the pinned project. */
export async function loadFolderConfig(dir: string): Promise<LoadedConfig> {
  try {
    return await loadConfig(dir);
  } catch (err) {
    if (err instanceof ConfigLoadError) throw new CliError(err.message);
    throw err;
  }
}

/** `--project`, else the config's `project.id` pin. */
export async function projectOf(ctx: CommandContext, loaded?: LoadedConfig): Promise<string> {
  const flag = stringFlag(ctx.flags, 'project');
  if (flag) return flag;
  if (!loaded && !findConfigFile(ctx.dir))
    throw new CliError(`no project: pass --project or pin project.id in ${join(ctx.dir, 'svc.config.ts')}`);
  const config = (loaded ?? (await loadFolderConfig(ctx.dir))).config as { project?: { id?: unknown } } | null;
  const id = config?.project?.id;
  if (typeof id !== 'string' || id === '')
    throw new CliError('no project: pass --project or pin project.id and project.tenantId in the config');
  return id;
}

/** `--project`, else the folder's pin when the folder holds a config, else undefined. */
export async function optionalProjectOf(ctx: CommandContext): Promise<string | undefined> {
  const flag = stringFlag(ctx.flags, 'project');
  if (flag) return flag;
  if (!findConfigFile(ctx.dir)) return undefined;
  const config = (await loadFolderConfig(ctx.dir)).config as { project?: { id?: unknown } } | null;
  const id = config?.project?.id;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/**
 * Sets `NAME=value` lines in a dotenv file, keeping every other line (comments included).
 * Written 0600: the file holds credentials.
 */
export function writeEnvVars(file: string, vars: Record<string, string>): void {
  const lines = existsSync(file) ? readFileSync(file, 'utf8').replace(/\n$/, '').split('\n') : [];
  const pending = new Map(Object.entries(vars));
  const out = lines.map((line) => {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(line);
    if (m && pending.has(m[1]!)) {
      const v = pending.get(m[1]!)!;
      pending.delete(m[1]!);
      return `${m[1]}=${v}`;
    }
    return line;
  });
  for (const [k, v] of pending) out.push(`${k}=${v}`);
  writeFileSync(file, out.filter((l, i) => !(i === 0 && l === '' && out.length === 1)).join('\n') + '\n', {
    mode: 0o600,
  });
}
