/** A strict argv parser: unknown flags are errors, not silently ignored. */
export type FlagKind = 'string' | 'boolean' | 'list';

export interface FlagSpec {
  [name: string]: FlagKind;
}

export type Flags = Record<string, string | boolean | string[] | undefined>;

export class UsageError extends Error {}

export const GLOBAL_FLAGS: FlagSpec = { url: 'string', token: 'string', dir: 'string', json: 'boolean', help: 'boolean' };

export function parseArgs(argv: string[], spec: FlagSpec): { positionals: string[]; flags: Flags } {
  const all = { ...GLOBAL_FLAGS, ...spec };
  const positionals: string[] = [];
  const flags: Flags = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const kind = all[name];
    if (!kind) throw new UsageError(`unknown flag --${name}`);
    if (kind === 'boolean') {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    const value = eq !== -1 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || (eq === -1 && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
    flags[name] =
      kind === 'list'
        ? value
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : value;
  }
  return { positionals, flags };
}
