import { describe, expect, test } from 'bun:test';
import { Lru, MemoryBudget } from '../../src/graphql/lru.ts';

/** Issue 10 row 3: caches bounded by entries and bytes, under one budget per process. */
const sized = (kind: string, maxEntries: number, maxBytes: number, budget?: MemoryBudget) =>
  new Lru<string, string>({ kind, maxEntries, maxBytes, sizeOf: (v, k) => v.length + k.length, budget });

describe('Lru bounded by bytes', () => {
  test('evicts the least recently used entries to stay under its bytes', () => {
    const c = sized('t', 100, 1000);
    for (let i = 0; i < 20; i++) c.set(`k${i}`.padEnd(10), 'x'.repeat(90));
    expect(c.bytes).toBeLessThanOrEqual(1000);
    expect(c.size).toBe(10);
    expect(c.get('k19'.padEnd(10))).toBeDefined();
    expect(c.get('k0'.padEnd(10))).toBeUndefined();
  });

  test('refuses one entry larger than an eighth of the cache', () => {
    const budget = new MemoryBudget(10_000);
    const c = sized('t', 100, 1000, budget);
    expect(c.set('big', 'x'.repeat(200))).toBe(false);
    expect(c.size).toBe(0);
    expect(budget.refused).toBe(1);
  });

  test('entry count still bounds it', () => {
    const c = sized('t', 3, 1_000_000);
    for (let i = 0; i < 10; i++) c.set(`k${i}`, 'v');
    expect(c.size).toBe(3);
  });
});

describe('one memory budget across caches', () => {
  test('the total of every cache stays under the budget; the largest cache gives way', () => {
    const budget = new MemoryBudget(2_000);
    const a = sized('documents', 1000, 1_600, budget);
    const b = sized('responses', 1000, 1_600, budget);
    for (let i = 0; i < 15; i++) a.set(`a${i}`, 'x'.repeat(98));
    expect(budget.usedBytes).toBe(a.bytes);
    for (let i = 0; i < 15; i++) b.set(`b${i}`, 'y'.repeat(98));
    expect(a.bytes + b.bytes).toBeLessThanOrEqual(2_000);
    expect(budget.usedBytes).toBe(a.bytes + b.bytes);
    expect(b.size).toBeGreaterThanOrEqual(9);
    expect(a.size).toBeGreaterThanOrEqual(9);
    const stats = budget.stats();
    expect(stats.kinds.documents!.bytes).toBe(a.bytes);
    expect(stats.kinds.responses!.entries).toBe(b.size);
    expect(stats.evictions).toBeGreaterThan(0);
  });

  test('clear and delete give bytes back', () => {
    const budget = new MemoryBudget(10_000);
    const a = sized('t', 100, 5_000, budget);
    a.set('k', 'v'.repeat(100));
    a.set('j', 'v'.repeat(100));
    a.delete('k');
    expect(budget.usedBytes).toBe(101);
    a.clear();
    expect(budget.usedBytes).toBe(0);
  });
});
