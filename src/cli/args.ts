import { parseArgs as parseArgv } from 'node:util';

/**
 * A strict argv parser over `node:util`'s `parseArgs`: unknown flags are errors, not silently
 * ignored, with the CLI's own wording (`unknown flag --x`, `--x needs a value`, `--x takes no
 * value`). Only `--long` flags are flags: anything else (`-5`, `-`, a path) is a positional, and
 * `--` ends the flags. A `list` flag is a string split on commas.
 */
export type FlagKind = 'string' | 'boolean' | 'list';

export interface FlagSpec {
  [name: string]: FlagKind;
}

export type Flags = Record<string, string | boolean | string[] | undefined>;

export class UsageError extends Error {}

export const GLOBAL_FLAGS: FlagSpec = {
  url: 'string',
  token: 'string',
  dir: 'string',
  json: 'boolean',
  help: 'boolean',
};

export function parseArgs(argv: string[], spec: FlagSpec): { positionals: string[]; flags: Flags } {
  const all: FlagSpec = { ...GLOBAL_FLAGS, ...spec };
  const options = Object.fromEntries(
    Object.entries(all).map(([name, kind]) => [
      name,
      { type: kind === 'boolean' ? ('boolean' as const) : ('string' as const) },
    ]),
  );
  // Not strict: node's own errors would change the CLI's wording, so the tokens are checked here.
  const { tokens } = parseArgv({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  const positionals: string[] = [];
  const flags: Flags = {};
  let shortAt = -1;
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value);
    else if (token.kind === 'option-terminator') continue;
    else if (!token.rawName.startsWith('--')) {
      // A single-dash word (`-5`, `-abc`): a positional, once for its group.
      if (token.index !== shortAt) positionals.push(argv[token.index]!);
      shortAt = token.index;
    } else {
      const { name, value, inlineValue } = token;
      const kind = Object.hasOwn(all, name) ? all[name] : undefined;
      if (!kind) throw new UsageError(`unknown flag --${name}`);
      if (kind === 'boolean') {
        if (inlineValue) throw new UsageError(`--${name} takes no value`);
        flags[name] = true;
        continue;
      }
      if (value === undefined || (!inlineValue && value.startsWith('--')))
        throw new UsageError(`--${name} needs a value`);
      flags[name] =
        kind === 'list'
          ? value
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean)
          : value;
    }
  }
  return { positionals, flags };
}
