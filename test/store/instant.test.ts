import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { pgInstant } from '../../src/store/instant.ts';

describe('pgInstant', () => {
  test('a time PostgreSQL stores comes back; years JavaScript parses and PostgreSQL does not are null', () => {
    expect(pgInstant('2026-11-29T10:00:00Z')?.toISOString()).toBe('2026-11-29T10:00:00.000Z');
    expect(pgInstant(0)?.toISOString()).toBe('1970-01-01T00:00:00.000Z');
    expect(pgInstant('9999-12-31T23:59:59.999Z')).not.toBeNull();
    expect(pgInstant('+275760-09-13T00:00:00.000Z')).toBeNull();
    expect(pgInstant('+010000-01-01T00:00:00.000Z')).toBeNull();
    expect(pgInstant('-000001-01-01T00:00:00.000Z')).toBeNull();
    for (const bad of ['', 'yesterday', '2026-13-01', null, undefined, {}, [], Number.NaN])
      expect(pgInstant(bad)).toBeNull();
  });

  test('whatever a client sends: null or a Date in years 1–9999, never a throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.double(), fc.integer(), fc.date()), (v) => {
        const d = pgInstant(v);
        if (d) expect(d.getUTCFullYear()).toBeGreaterThanOrEqual(1);
        if (d) expect(d.getUTCFullYear()).toBeLessThanOrEqual(9999);
      }),
      { numRuns: 2000 },
    );
  });
});
