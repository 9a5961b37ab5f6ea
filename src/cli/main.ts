import { resolve } from 'node:path';
import { parseArgs, UsageError } from './args.ts';
import { CliError, ControlClient } from './client.ts';
import type { Command } from './command.ts';
import { COMMANDS } from './commands/index.ts';

function usage(commands: Command[]): string {
  const lines = commands.map((c) => `  ${c.usage.padEnd(60)} ${c.summary}`);
  return [
    'usage: svc <command> [flags]',
    '',
    'commands:',
    ...lines,
    '',
    'global flags: --url U (SVC_URL)  --token T (SVC_TOKEN)  --dir D  --json  --help',
  ].join('\n');
}

function findCommand(words: string[]): { command: Command; rest: string[] } | undefined {
  let best: Command | undefined;
  for (const c of COMMANDS) {
    if (c.path.every((w, i) => words[i] === w) && (!best || c.path.length > best.path.length)) best = c;
  }
  return best ? { command: best, rest: words.slice(best.path.length) } : undefined;
}

/** Runs the CLI; returns the exit code. Output goes through the given writers (testable). */
export async function runCli(
  argv: string[],
  io: { out: (s: string) => void; err: (s: string) => void } = {
    out: (s) => console.log(s),
    err: (s) => console.error(s),
  },
  env: Record<string, string | undefined> = process.env,
): Promise<number> {
  const words = argv.filter((a) => !a.startsWith('--'));
  const found = findCommand(words.slice(0, 3));
  if (!found) {
    if (argv.length === 0 || argv.includes('--help') || argv[0] === 'help') {
      io.out(usage(COMMANDS));
      return argv.length === 0 ? 2 : 0;
    }
    io.err(`svc: unknown command "${words.slice(0, 2).join(' ')}"\n${usage(COMMANDS)}`);
    return 2;
  }
  const { command } = found;
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(argv.slice(command.path.length), command.flags);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`svc: ${err.message}\nusage: ${command.usage}`);
      return 2;
    }
    throw err;
  }
  if (parsed.flags.help) {
    io.out(`usage: ${command.usage}\n${command.summary}`);
    return 0;
  }
  const missing = (command.required ?? []).filter(
    (f) => typeof parsed.flags[f] !== 'string' && !Array.isArray(parsed.flags[f]),
  );
  if (missing.length) {
    io.err(
      `svc: ${missing.map((f) => `--${f}`).join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required\nusage: ${command.usage}`,
    );
    return 2;
  }
  const json = parsed.flags.json === true;
  const url = (parsed.flags.url as string | undefined) ?? env.SVC_URL ?? 'http://127.0.0.1:4000';
  const token = (parsed.flags.token as string | undefined) ?? env.SVC_TOKEN;
  const dir = resolve((parsed.flags.dir as string | undefined) ?? '.');
  try {
    const result = await command.run({
      positionals: parsed.positionals,
      flags: parsed.flags,
      client: new ControlClient({ url, token }),
      dir,
      json,
      env,
    });
    io.out(json || result.text === undefined ? JSON.stringify(result.output, null, json ? undefined : 2) : result.text);
    return result.exitCode ?? 0;
  } catch (err) {
    if (err instanceof CliError || err instanceof UsageError) {
      io.err(`svc: ${err.message}`);
      return err instanceof UsageError ? 2 : 1;
    }
    io.err(`svc: ${(err as Error).message ?? String(err)}`);
    return 1;
  }
}
