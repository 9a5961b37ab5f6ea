import { afterAll, expect, test } from 'bun:test';
import postgres from 'postgres';
import { inline, literal } from '../../src/content/tx.ts';
import { serverUrl } from '../support/db.ts';

// Writes travel as one simple-protocol message with their values inlined (src/content/tx.ts):
// every value must come back from PostgreSQL exactly as sent, however it was built.
const sql = postgres(serverUrl(), { max: 1, onnotice: () => {} });
afterAll(() => sql.end());

const hostile = [
  '',
  'plain',
  "it's",
  '$q$',
  'x$q$); drop table records; --',
  'ends with $',
  'ends with $q',
  '$$',
  '$q$$q0$$q1$$q2$ tags one might guess',
  '$'.repeat(1000),
  'ünïcødé ✓ 😀',
  '\\ backslash \\n',
  Array.from({ length: 20_000 }, (_, i) => `$q${i.toString(36)}$`).join(''),
];

test('hostile strings round-trip through an inlined literal', async () => {
  for (const v of hostile) {
    const [row] = await sql.unsafe(`select ${literal(v)}::text as v`);
    expect(row!.v).toBe(v);
  }
});

test('arrays, numbers, booleans and JSON values round-trip', async () => {
  const [row] = await sql.unsafe(
    `select ${literal(['a', '$q$', 'b'])}::text[] as a, ${literal(-1.5e3)}::float8 as n, ${literal(true)} as b, ${literal({ k: '$q$' })}::jsonb as j`,
  );
  expect(row!.a).toEqual(['a', '$q$', 'b']);
  expect(row!.n).toBe(-1500);
  expect(row!.b).toBe(true);
  expect(row!.j).toEqual({ k: '$q$' });
});

test('NUL and non-finite numbers are refused before they reach PostgreSQL', () => {
  expect(() => literal('a\0b')).toThrow('NUL');
  expect(() => literal(Number.NaN)).toThrow('finite');
});

test('inline puts each parameter in its $n placeholder, two-digit ones included, and refuses a missing one', () => {
  const text = 'select $1::text, $10::text, $2, $q$keep $3$q$, $1';
  const params = ['a', 2, 'c', 4, 5, 6, 7, 8, 9, 'ten'];
  const once = inline({ text, params });
  expect(once).toBe('select $q$a$q$::text, $q$ten$q$::text, (2), $q$keep $q$c$q$$q$, $q$a$q$');
  // The text is cut once and reused: the second call must answer the same.
  expect(inline({ text, params })).toBe(once);
  expect(inline({ text: 'select 1', params: [] })).toBe('select 1');
  expect(() => inline({ text: 'select $2', params: ['only one'] })).toThrow('statement has no parameter $2');
  expect(() => inline({ text: 'select $0', params: ['x'] })).toThrow('statement has no parameter $0');
});
