import { describe, expect, test } from 'bun:test';
import { startsAsMutation } from '../../src/graphql/execute.ts';
import { digest, documentKey } from '../../src/graphql/response-cache.ts';
import { checkInputValue } from '../../src/graphql/input-values.ts';
import { LIMITS } from '../../src/graphql/limits.ts';
import { pathOf } from '../../src/http/body.ts';
import { newRecordId } from '../../src/content/record-ids.ts';

// The per-mutation shortcuts of "Writes, session 5" (docs/decisions.md): each must answer what
// the longer way answered.
describe('mutation path shortcuts', () => {
  test('startsAsMutation reads past ignored tokens and only takes the keyword', () => {
    for (const q of [
      'mutation { a }',
      '  mutation{a}',
      '\ufeff,\n\tmutation M($x: Int) { a }',
      '# c\nmutation { a }',
      '#c\r\n  # d\n mutation\n{ a }',
    ])
      expect(startsAsMutation(q)).toBe(true);
    for (const q of [
      '{ a }',
      'query { a }',
      'query M { a } mutation N { b }',
      'mutations { a }',
      'mutation_x { a }',
      'mutation1',
      '# mutation\n{ a }',
      '',
      'subscription { a }',
    ])
      expect(startsAsMutation(q)).toBe(false);
  });

  test('documentKey is the digest of name and text, remembered or not', () => {
    const q = 'mutation($id: ID!) { publishNoteVersion(_id: $id) { _id } }';
    expect(documentKey('', q)).toBe(digest('', q));
    expect(documentKey('', q)).toBe(digest('', q));
    expect(documentKey('Op', q)).toBe(digest('Op', q));
    expect(documentKey('Op', q)).not.toBe(documentKey('', q));
    const long = `{ a }${' '.repeat(5_000)}`;
    expect(documentKey('', long)).toBe(digest('', long));
  });

  test('pathOf answers what new URL(url).pathname answers', () => {
    for (const u of [
      'http://127.0.0.1:4000/graphql',
      'http://h/graphql?x=1',
      'http://h/',
      'http://h',
      'http://h/a/../graphql',
      'http://h/api/files/upload%2F..',
      'http://h/x#y',
      'http://h?q/x',
      'http://h#a/b',
      'http://h/a\\b',
      'http://h/.well-known/x',
      'http://h/graphql?a=/b#c',
      'http://u:p@h:1/v1/control/projects',
    ]) {
      expect(pathOf(u)).toBe(new URL(u).pathname);
    }
  });

  test('checkInputValue names where the problem is, as a dotted path', () => {
    expect(checkInputValue({ a: [1, { b: 'ok' }, { c: 'x\0y' }] }, LIMITS.maxInputDepth)).toEqual({
      path: 'a.2.c',
      reason: 'NUL characters are not allowed',
    });
    expect(checkInputValue('x\0', LIMITS.maxInputDepth)).toEqual({
      path: '',
      reason: 'NUL characters are not allowed',
    });
    expect(checkInputValue({ a: { ['k\0']: 1 } }, LIMITS.maxInputDepth)).toEqual({
      path: 'a',
      reason: 'object keys: NUL characters are not allowed',
    });
    expect(checkInputValue({ a: { b: { c: 1 } } }, 2)).toEqual({
      path: 'a.b',
      reason: 'values may nest at most 2 levels deep',
    });
    expect(checkInputValue({ a: [1, true, null, 'fine', { b: 2 }] }, LIMITS.maxInputDepth)).toBeNull();
  });

  test('record ids keep their shape and creation order', () => {
    const ids = Array.from({ length: 2_000 }, () => newRecordId());
    for (const id of ids) expect(id).toMatch(/^rec_[0-9a-f]{12}[0-9a-f]{6}[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
