import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { decodePost } from '../../src/http/graphql-decode.ts';

/**
 * A body that is exactly `{"documentId":"sha256:<64 hex>"}` is read without JSON.parse
 * (src/http/graphql-decode.ts): for every body of that shape or near it — any 64 characters in
 * the hash's place (hex of both cases, NUL, lone surrogates, non-ASCII, quotes, backslashes),
 * a character more or less — the request, or the error, is the one the full parse gives. The
 * full parse is forced by a space after the brace, which JSON ignores.
 */
const full = (text: string) => (text.startsWith('{') ? `{ ${text.slice(1)}` : text);

function outcome(text: string): unknown {
  try {
    return { request: decodePost(text) };
  } catch (err) {
    return { error: (err as Error).message, code: (err as { code?: string }).code };
  }
}

const hexChar = fc.constantFrom(...'0123456789abcdefABCDEF');
const anyChar = fc.oneof(
  hexChar,
  fc.constantFrom('\u0000', '\ud800', '\udfff', 'é', '中', '"', '\\', '}', ' ', 'g', 'G', 'x'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
const payload = fc.oneof(
  fc.array(hexChar, { minLength: 64, maxLength: 64 }).map((a) => a.join('')),
  fc.array(anyChar, { minLength: 64, maxLength: 64 }).map((a) => a.join('')),
  fc.array(hexChar, { minLength: 62, maxLength: 66 }).map((a) => a.join('')),
  fc.string({ unit: 'binary', maxLength: 80 }),
);

describe('POST bodies naming a document by id', () => {
  test('the short path and the full parse agree on every body of the shape and near it', () => {
    fc.assert(
      fc.property(payload, fc.constantFrom('', '}', '"}', '"} ', '"}}', '",'), (hash, tail) => {
        const text = `{"documentId":"sha256:${hash}${tail === '' ? '"}' : tail}`;
        expect(outcome(text)).toEqual(outcome(full(text)));
      }),
      { numRuns: 5_000, seed: 31 },
    );
  });

  test('a well-formed id is the lowercase hash with nothing else set', () => {
    const hash = 'AB'.repeat(32);
    expect(decodePost(`{"documentId":"sha256:${hash}"}`)).toEqual({
      query: '',
      variables: null,
      operationName: null,
      documentId: 'ab'.repeat(32),
      persisted: false,
    });
  });
});
