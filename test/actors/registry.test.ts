import { describe, expect, test } from 'bun:test';
import { ActorRegistry, type Actor } from '../../src/actors/registry.ts';

/** An actor whose stop finishes only when the test says so. */
class Slow implements Actor {
  static live = 0;
  static maxLive = 0;
  release!: () => void;
  readonly stopped: Promise<void>;
  constructor(readonly n: number) {
    Slow.live++;
    Slow.maxLive = Math.max(Slow.maxLive, Slow.live);
    this.stopped = new Promise((r) => (this.release = r));
  }
  canUnload() {
    return true;
  }
  idleSince() {
    return 0;
  }
  async stop() {
    await this.stopped;
    Slow.live--;
  }
}

describe('actor registry: loading, live, unloading', () => {
  for (const how of ['evict', 'sweep'] as const) {
    test(`a get while the actor is stopping (${how}) waits for the stop, then spawns a fresh one`, async () => {
      Slow.live = 0;
      Slow.maxLive = 0;
      let spawned = 0;
      const reg = new ActorRegistry<Slow>(() => new Slow(++spawned), { idleMs: 0, sweepMs: 0 });
      const first = await reg.get('k');
      const unloading = how === 'evict' ? reg.evict('k') : reg.sweep();
      let second: Slow | undefined;
      const getting = reg.get('k').then((a) => (second = a));
      await Bun.sleep(20);
      // Still stopping: no second actor for the same key.
      expect(spawned).toBe(1);
      expect(second).toBeUndefined();
      // Another caller joins the same pending creation.
      const alsoGetting = reg.get('k');
      first.release();
      await unloading;
      await getting;
      expect(await alsoGetting).toBe(second!);
      expect(spawned).toBe(2);
      expect(second).not.toBe(first);
      expect(Slow.maxLive).toBe(1);
      expect(reg.peek('k')).toBe(second!);
      second!.release();
      await reg.stopAll();
      expect(Slow.live).toBe(0);
    });
  }

  test('stopAll waits for actors still stopping', async () => {
    const reg = new ActorRegistry<Slow>(() => new Slow(1), { idleMs: 0, sweepMs: 0 });
    const a = await reg.get('k');
    void reg.evict('k');
    let done = false;
    const all = reg.stopAll().then(() => (done = true));
    await Bun.sleep(20);
    expect(done).toBe(false);
    a.release();
    await all;
    expect(done).toBe(true);
  });
});
