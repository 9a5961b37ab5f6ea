/**
 * JSON text of a value of any depth. JSON.stringify recurses: a hostile test value (20,000
 * nested `AND` lists) overflows the test's own stack before it reaches the service. This walks
 * with an explicit stack. Plain JSON values only (no toJSON, no undefined in arrays).
 */
export function deepJson(value: unknown): string {
  const out: string[] = [];
  // Either a value to write or a literal piece of text (a comma, a closing bracket).
  const stack: ({ v: unknown } | string)[] = [{ v: value }];
  while (stack.length) {
    const top = stack.pop()!;
    if (typeof top === 'string') {
      out.push(top);
      continue;
    }
    const v = top.v;
    if (v === null || typeof v !== 'object') {
      out.push(JSON.stringify(v) ?? 'null');
    } else if (Array.isArray(v)) {
      out.push('[');
      stack.push(']');
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ v: v[i] });
        if (i > 0) stack.push(',');
      }
    } else {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined);
      out.push('{');
      stack.push('}');
      for (let i = entries.length - 1; i >= 0; i--) {
        stack.push({ v: entries[i]![1] });
        stack.push(`${JSON.stringify(entries[i]![0])}:`);
        if (i > 0) stack.push(',');
      }
    }
  }
  return out.join('');
}
