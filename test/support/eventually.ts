/** Polls `check` (which may query, e.g. the database) until it holds or `ms` pass (for effects that cross processes). */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await Bun.sleep(20);
  }
}
