import { expect, spyOn, test } from 'bun:test';
import { FailureLog } from '../../src/store/failure-log.ts';

test('a failing loop logs its first failure, then at most one line per interval with the count left out', () => {
  const lines: string[] = [];
  const spy = spyOn(console, 'error').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
  try {
    let now = 0;
    const log = new FailureLog('loop', 60_000, () => now);
    for (let i = 0; i < 1000; i++, now += 250) log.fail(new Error('database "x" does not exist'));
    // 250 s of failing ticks: the first line, then one each minute.
    expect(lines).toHaveLength(5);
    expect(lines[0]).toBe('loop: database "x" does not exist');
    expect(lines[1]).toBe('loop: database "x" does not exist (and 239 more since the last line)');
    expect(log.failures).toBe(1000);
    log.ok();
    log.ok();
    expect(lines.at(-1)).toBe('loop: working again');
    expect(lines).toHaveLength(6);
    // After recovery, the next failure is logged at once.
    log.fail('again');
    expect(lines.at(-1)).toBe('loop: again');
  } finally {
    spy.mockRestore();
  }
});
