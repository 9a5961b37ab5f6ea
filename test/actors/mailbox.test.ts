import { describe, expect, test } from 'bun:test';
import { Mailbox } from '../../src/actors/mailbox.ts';
import { ActorRegistry, type Actor } from '../../src/actors/registry.ts';

describe('mailbox', () => {
  test('handles messages one at a time in arrival order', async () => {
    const seen: number[] = [];
    let inside = 0;
    let maxInside = 0;
    const box = new Mailbox<number, number>(async (n) => {
      inside++;
      maxInside = Math.max(maxInside, inside);
      await Bun.sleep(n % 3);
      seen.push(n);
      inside--;
      return n * 2;
    });
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => box.ask(i)));
    expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => i * 2));
    expect(maxInside).toBe(1);
  });

  test('a failing handler fails that message only and the actor goes on', async () => {
    const box = new Mailbox<string, string>((m) => {
      if (m === 'boom') throw new Error('handler failed');
      return m.toUpperCase();
    });
    const a = box.ask('a');
    const b = box.ask('boom');
    const c = box.ask('c');
    expect(await a).toBe('A');
    await expect(b).rejects.toThrow('handler failed');
    expect(await c).toBe('C');
    expect(box.pending).toBe(0);
  });

  test('a closed mailbox finishes queued messages and refuses new ones', async () => {
    const box = new Mailbox<number, number>(async (n) => {
      await Bun.sleep(5);
      return n;
    });
    const queued = [box.ask(1), box.ask(2)];
    await box.close();
    expect(await Promise.all(queued)).toEqual([1, 2]);
    await expect(box.ask(3)).rejects.toThrow('actor stopped');
  });
});

class Counter implements Actor {
  stopped = false;
  busy = false;
  last = Date.now();
  canUnload() {
    return !this.busy;
  }
  idleSince() {
    return this.last;
  }
  async stop() {
    this.stopped = true;
  }
}

describe('actor registry', () => {
  test('concurrent gets of a cold actor share one in-flight creation', async () => {
    let spawned = 0;
    const reg = new ActorRegistry<Counter>(
      async () => {
        spawned++;
        await Bun.sleep(10);
        return new Counter();
      },
      { idleMs: 1000, sweepMs: 0 },
    );
    const [a, b, c] = await Promise.all([reg.get('k'), reg.get('k'), reg.get('k')]);
    expect(spawned).toBe(1);
    expect(a).toBe(b);
    expect(b).toBe(c);
    await reg.stopAll();
  });

  test('a failed creation is not cached and the next get tries again', async () => {
    let tries = 0;
    const reg = new ActorRegistry<Counter>(
      () => {
        tries++;
        if (tries === 1) throw new Error('not yet');
        return new Counter();
      },
      { idleMs: 1000, sweepMs: 0 },
    );
    await expect(reg.get('k')).rejects.toThrow('not yet');
    expect(await reg.get('k')).toBeInstanceOf(Counter);
    await reg.stopAll();
  });

  test('idle actors unload; busy ones stay', async () => {
    const reg = new ActorRegistry<Counter>(() => new Counter(), { idleMs: 50, sweepMs: 0 });
    const idle = await reg.get('idle');
    const busy = await reg.get('busy');
    busy.busy = true;
    const gone = await reg.sweep(Date.now() + 100);
    expect(gone).toEqual(['idle']);
    expect(idle.stopped).toBe(true);
    expect(busy.stopped).toBe(false);
    expect(reg.peek('busy')).toBe(busy);
    expect(reg.peek('idle')).toBeUndefined();
    await reg.stopAll();
  });
});

describe('actor registry: attachments and unloading', () => {
  test('an attached actor is never swept; after the last release it unloads when idle', async () => {
    const reg = new ActorRegistry<Counter>(() => new Counter(), { idleMs: 50, sweepMs: 0 });
    const a = await reg.attach('room');
    const b = await reg.attach('room');
    expect(a.actor).toBe(b.actor);
    expect(reg.attachments('room')).toBe(2);
    expect(await reg.sweep(Date.now() + 100)).toEqual([]);
    a.release();
    a.release(); // a second release of the same hold changes nothing
    expect(reg.attachments('room')).toBe(1);
    expect(await reg.sweep(Date.now() + 100)).toEqual([]);
    b.release();
    expect(await reg.sweep(Date.now() + 100)).toEqual(['room']);
    expect(a.actor.stopped).toBe(true);
    await reg.stopAll();
  });

  test('a get during unloading waits for the stop, then spawns a fresh actor', async () => {
    const events: string[] = [];
    let n = 0;
    class Slow extends Counter {
      id = ++n;
      override async stop() {
        events.push(`stop ${this.id} begins`);
        await Bun.sleep(30);
        events.push(`stop ${this.id} ends`);
        this.stopped = true;
      }
    }
    const reg = new ActorRegistry<Slow>(
      () => {
        events.push(`spawn ${n + 1}`);
        return new Slow();
      },
      { idleMs: 1000, sweepMs: 0 },
    );
    const first = await reg.get('k');
    const evicting = reg.evict('k');
    expect(reg.stateOf('k')).toBe('unloading');
    const second = await reg.get('k');
    await evicting;
    expect(second).not.toBe(first);
    expect(events).toEqual(['spawn 1', 'stop 1 begins', 'stop 1 ends', 'spawn 2']);
    expect(reg.counts()).toEqual({ loading: 0, live: 1, unloading: 0 });
    await reg.stopAll();
    expect(second.stopped).toBe(true);
  });
});
