import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { parseArgs, UsageError } from '../../src/cli/args.ts';

const SPEC = { name: 'string', force: 'boolean', scopes: 'list' } as const;
const usage = (argv: string[]) => {
  try {
    parseArgs(argv, SPEC);
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  return null;
};

describe('cli argv', () => {
  test('flags, values, lists and positionals', () => {
    expect(
      parseArgs(['push', '--name', 'a', '--force', '--scopes', 'x, y,,z', '-5', '--json', '--', '--name'], SPEC),
    ).toEqual({
      positionals: ['push', '-5', '--name'],
      flags: { name: 'a', force: true, scopes: ['x', 'y', 'z'], json: true },
    });
    expect(parseArgs(['--name=-b', '--url=http://x'], SPEC).flags).toEqual({ name: '-b', url: 'http://x' });
  });

  test('refusals keep the CLI wording', () => {
    expect(usage(['--nope'])).toBe('unknown flag --nope');
    expect(usage(['--toString=1'])).toBe('unknown flag --toString');
    expect(usage(['--name'])).toBe('--name needs a value');
    expect(usage(['--name', '--force'])).toBe('--name needs a value');
    expect(usage(['--force=yes'])).toBe('--force takes no value');
  });

  test('fuzz: any argv parses or is a UsageError', () => {
    const word = fc.oneof(
      fc.string(),
      fc.constantFrom('--', '-', '--name', '--force', '--scopes', '--x=\0', '-\uD800', '--é', '--name=\uDFFF'),
    );
    fc.assert(
      fc.property(fc.array(word, { maxLength: 20 }), (argv) => void usage(argv)),
      { numRuns: 500 },
    );
  });
});
