import { describe, expect, test } from 'bun:test';
import { ANONYMOUS, chooseVariant, matches, ruleErrors, segmentsOf, targeting } from '../../src/content/targeting.ts';
import { validateConfig } from '../../src/config/validate.ts';

const cond = (path: string, operator: string, value?: unknown) => ({
  type: 'condition',
  left: { type: 'field', path },
  operator,
  ...(value === undefined ? {} : { right: { type: 'literal', value } }),
});

describe('rule evaluation', () => {
  test('operators over attributes, dotted paths, groups and negation', () => {
    const who = {
      totalSpent: 1500,
      plan: 'gold',
      tags: ['beta', 'eu'],
      address: { country: 'DE' },
      joined: '2024-03-01',
    };
    expect(matches(cond('totalSpent', 'greater_than', 1000), who)).toBe(true);
    expect(matches(cond('totalSpent', 'greater_than', '1000'), who)).toBe(false); // mixed types never match
    expect(matches(cond('totalSpent', 'less_than_or_equal', 1500), who)).toBe(true);
    expect(matches(cond('address.country', 'in', ['DE', 'AT']), who)).toBe(true);
    expect(matches(cond('address.country', 'not_in', ['DE']), who)).toBe(false);
    expect(matches(cond('tags', 'contains', 'beta'), who)).toBe(true);
    expect(matches(cond('plan', 'starts_with', 'go'), who)).toBe(true);
    expect(matches(cond('joined', 'greater_than_or_equal', '2024-01-01'), who)).toBe(true);
    expect(matches(cond('missing', 'not_exists'), who)).toBe(true);
    expect(matches(cond('toString', 'exists'), who)).toBe(false); // own properties only
    expect(matches({ type: 'or', rules: [cond('plan', 'equals', 'free'), cond('tags', 'contains', 'eu')] }, who)).toBe(
      true,
    );
    expect(matches({ type: 'not', rule: cond('plan', 'equals', 'gold') }, who)).toBe(false);
    expect(matches([cond('plan', 'equals', 'gold'), cond('totalSpent', 'less_than', 100)], who)).toBe(false);
  });

  test('segments: only those whose rules hold; a segment without rules is empty', () => {
    const segs = [
      { key: 'vip', rules: cond('customer.totalSpent', 'greater_than', 1000) },
      { key: 'none', rules: [] },
      { key: 'gold', rules: cond('plan', 'equals', 'gold') },
    ];
    expect(segmentsOf(segs, { plan: 'gold', customer: { totalSpent: 2000 } })).toEqual(['vip', 'gold']);
    expect(segmentsOf(segs, {})).toEqual([]);
  });

  test('the first variant whose rules hold; ruleless variants only by id; a forced id wins', () => {
    const variants = [
      { id: 'vip', rules: [{ type: 'segment', key: 'vip' }], data: { t: 'vip' } },
      { id: 'hidden', rules: [], data: { t: 'hidden' } },
      { id: 'members', rules: [cond('authStatus', 'equals', 'authenticated')], data: { t: 'members' } },
      { id: 'anon', rules: [cond('authStatus', 'equals', '')], data: { t: 'anon' } },
    ] as never;
    expect(chooseVariant(variants, ANONYMOUS)?.id).toBe('anon');
    expect(chooseVariant(variants, targeting('authenticated', []))?.id).toBe('members');
    expect(chooseVariant(variants, targeting('authenticated', ['vip']))?.id).toBe('vip');
    expect(chooseVariant(variants, targeting('', [], 'hidden'))?.id).toBe('hidden');
    expect(chooseVariant(variants, targeting('', [], 'default'))).toBeNull();
    expect(chooseVariant(null, ANONYMOUS)).toBeNull();
    expect(targeting('authenticated', ['b', 'a', 'b']).key).toBe(targeting('authenticated', ['a', 'b']).key);
  });
});

describe('rule checks', () => {
  test('unknown operators and node types, missing values, segment nodes inside segments, depth', () => {
    expect(ruleErrors([cond('a', 'equals', 1), cond('b', 'exists')], 'r', false)).toEqual([]);
    expect(ruleErrors(cond('a', 'like', 1), 'r', false)[0]!.path).toBe('r.operator');
    expect(ruleErrors(cond('a', 'equals'), 'r', false)[0]!.path).toBe('r.right');
    expect(ruleErrors(cond('a b', 'equals', 1), 'r', false)[0]!.path).toBe('r.left.path');
    expect(ruleErrors({ type: 'segment', key: 'x' }, 'r', false)[0]!.path).toBe('r.type');
    expect(ruleErrors({ type: 'segment', key: 'x' }, 'r', true)).toEqual([]);
    let deep: unknown = cond('a', 'exists');
    for (let i = 0; i < 12; i++) deep = { type: 'not', rule: deep };
    expect(ruleErrors(deep, 'r', true)[0]!.message).toContain('nest');
  });

  test('a pushed segment with a bad rule is a config error naming the path', () => {
    const { errors } = validateConfig({
      key: 'k',
      name: 'n',
      segments: [{ key: 'vip', name: 'VIP', rules: cond('spent', 'bigger_than', 1) }],
    });
    expect(errors.map((e) => e.path)).toContain('segments[0].rules.operator');
    const ok = validateConfig({
      key: 'k',
      name: 'n',
      segments: [{ key: 'vip', name: 'VIP', rules: cond('customer.totalSpent', 'greater_than', 1000) }],
    });
    expect(ok.errors).toEqual([]);
  });

  test('model access.read is checked at push', () => {
    const { errors } = validateConfig({
      key: 'k',
      name: 'n',
      models: [{ key: 'order', name: 'Order', access: { read: ['owner'] }, fields: [] }],
    });
    expect(errors.map((e) => e.path)).toContain('models[0].access.read[0]');
  });
});
