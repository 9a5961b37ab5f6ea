import { afterEach, describe, expect, spyOn, test } from 'bun:test';
import { BadUserInput, toSvcError } from '../../src/errors.ts';
import { maskError } from '../../src/graphql/errors.ts';
import { restError } from '../../src/http/errors.ts';

/** What operators see: every unexpected fault is logged once, with its stack, wherever it was converted. */
let spy: ReturnType<typeof spyOn> | undefined;
afterEach(() => spy?.mockRestore());

function logged(): string[] {
  return spy!.mock.calls.map((args: unknown[]) => args.map(String).join(' '));
}

describe('unexpected errors are logged even when converted before masking', () => {
  test('maskError(toSvcError(fault)) logs the fault and sends only the masked message', () => {
    spy = spyOn(console, 'error').mockImplementation(() => {});
    const wire = maskError(toSvcError(new Error('relation "records" does not exist')), false);
    expect(wire).toEqual({ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } });
    expect(logged()).toHaveLength(1);
    expect(logged()[0]).toContain('relation "records" does not exist');
  });

  test('restError logs a converted fault once, and a raw one once', async () => {
    spy = spyOn(console, 'error').mockImplementation(() => {});
    const a = restError(toSvcError(new Error('socket hang up')));
    const b = restError(new Error('ECONNRESET'));
    expect(a.status).toBe(500);
    expect(await a.json()).toEqual({ error: 'INTERNAL_SERVER_ERROR', message: 'Internal server error' });
    expect(await b.text()).not.toContain('ECONNRESET');
    expect(logged()).toHaveLength(2);
    expect(logged()[0]).toContain('socket hang up');
    expect(logged()[1]).toContain('ECONNRESET');
  });

  test("a client's error is not logged as a fault", () => {
    spy = spyOn(console, 'error').mockImplementation(() => {});
    expect(maskError(toSvcError(new BadUserInput('bad')), false).extensions?.code).toBe('BAD_USER_INPUT');
    expect(restError(new BadUserInput('bad')).status).toBe(400);
    expect(logged()).toEqual([]);
  });
});
