import type { Flags, FlagSpec } from './args.ts';
import type { ControlClient } from './client.ts';

export interface CommandContext {
  positionals: string[];
  flags: Flags;
  client: ControlClient;
  /** The config folder (`--dir`, default the current one). */
  dir: string;
  json: boolean;
  env: Record<string, string | undefined>;
}

/** What a command prints: the JSON object, and optionally a human rendering of it. */
export interface CommandResult {
  output: unknown;
  text?: string;
  /** Non-zero exit even though the command produced output (for example push errors). */
  exitCode?: number;
}

export interface Command {
  /** Words after `svc`, for example `['tenants', 'create']`. */
  path: string[];
  summary: string;
  usage: string;
  flags: FlagSpec;
  /** Flags the command cannot run without: checked before any request, named as typed (`--name is required`). */
  required?: string[];
  run(ctx: CommandContext): Promise<CommandResult>;
}

export function stringFlag(flags: Flags, name: string): string | undefined {
  const v = flags[name];
  return typeof v === 'string' ? v : undefined;
}

export function listFlag(flags: Flags, name: string): string[] | undefined {
  const v = flags[name];
  return Array.isArray(v) ? v : undefined;
}
