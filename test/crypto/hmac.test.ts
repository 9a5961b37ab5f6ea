import { describe, expect, test } from 'bun:test';
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { removeTempDir, tempDir } from '../support/tmp.ts';
import { safeEqual, sign, verify } from '../../src/crypto/hmac.ts';
import { readUnsubscribeToken, unsubscribeToken } from '../../src/identity/mailer.ts';
import { secretsKeyring } from '../../src/secrets-key.ts';

describe('crypto/hmac', () => {
  test('signs as HMAC-SHA256 of the parts in order, in the encoding asked', () => {
    const want = createHmac('sha256', 'k').update('1700000000.').update('{"a":1}').digest();
    expect(sign('k', ['1700000000.', '{"a":1}'], 'hex')).toBe(want.toString('hex'));
    expect(sign('k', '1700000000.{"a":1}', 'base64url')).toBe(want.toString('base64url'));
    expect(sign(Buffer.from('k'), new TextEncoder().encode('1700000000.{"a":1}'), 'hex')).toBe(want.toString('hex'));
  });

  test('verifies under the current key and any previous one, not under others', () => {
    const ring = { current: 'new', previous: ['old'] };
    expect(sign(ring, 'x', 'hex')).toBe(sign('new', 'x', 'hex'));
    expect(verify(ring, 'x', sign('new', 'x', 'hex'), 'hex')).toBe(true);
    expect(verify(ring, 'x', sign('old', 'x', 'hex'), 'hex')).toBe(true);
    expect(verify(ring, 'x', sign('other', 'x', 'hex'), 'hex')).toBe(false);
    expect(verify(['a', 'b'], 'x', sign('b', 'x', 'base64url'), 'base64url')).toBe(true);
    expect(verify('a', 'y', sign('a', 'x', 'hex'), 'hex')).toBe(false);
    // Upper-case hex is the right bytes spelt another way: refused (callers normalise first).
    expect(verify('a', 'x', sign('a', 'x', 'hex').toUpperCase(), 'hex')).toBe(false);
  });

  test('safeEqual: equal strings and bytes only; lengths may differ', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual(Buffer.from([1, 2]), 'x')).toBe(false);
  });

  test('fuzz: any text or bytes, any signature guess, never throws and only the real one passes', () => {
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.constantFrom('\0', '\uD800', 'é\0\uDFFF', 'x'.repeat(100_000)),
    );
    fc.assert(
      fc.property(
        text,
        fc.oneof(text, fc.uint8Array()),
        text,
        fc.constantFrom('hex' as const, 'base64url' as const),
        (key, data, guess, enc) => {
          const real = sign(key || 'k', data, enc);
          expect(verify(key || 'k', data, real, enc)).toBe(true);
          expect(verify({ current: 'other', previous: [key || 'k'] }, data, real, enc)).toBe(true);
          expect(verify(key || 'k', data, guess, enc)).toBe(guess === real);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('rotating the secrets key', () => {
  test('an unsubscribe link made under the old key still opens while the old key is listed as previous', () => {
    const dataDir = tempDir('svc-hmac-');
    const saved = { key: process.env.SVC_SECRETS_KEY, prev: process.env.SVC_SECRETS_KEY_PREVIOUS };
    try {
      process.env.SVC_SECRETS_KEY = 'first key';
      delete process.env.SVC_SECRETS_KEY_PREVIOUS;
      const link = unsubscribeToken(dataDir, 'p1', 'ann@example.com', 'news');
      expect(readUnsubscribeToken(dataDir, link)).toEqual({ projectId: 'p1', email: 'ann@example.com', list: 'news' });

      process.env.SVC_SECRETS_KEY = 'second key';
      expect(readUnsubscribeToken(dataDir, link)).toBeNull();
      process.env.SVC_SECRETS_KEY_PREVIOUS = 'zeroth key, first key';
      expect(secretsKeyring(dataDir).previous).toHaveLength(2);
      expect(readUnsubscribeToken(dataDir, link)).toEqual({ projectId: 'p1', email: 'ann@example.com', list: 'news' });
      // New links are signed with the new key only.
      const fresh = unsubscribeToken(dataDir, 'p1', 'ann@example.com', 'news');
      expect(fresh).not.toBe(link);
      delete process.env.SVC_SECRETS_KEY_PREVIOUS;
      expect(readUnsubscribeToken(dataDir, fresh)).not.toBeNull();
    } finally {
      for (const [k, v] of [
        ['SVC_SECRETS_KEY', saved.key],
        ['SVC_SECRETS_KEY_PREVIOUS', saved.prev],
      ] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      removeTempDir(dataDir);
    }
  });
});
