import type { Db } from '../src/db/knex';
import { relayLoop } from '../src/db/listen';
import { eachLimited } from '../src/infra/each-limited';

// No channel to LISTEN on: the loop never touches its database.
const NO_DB = null as unknown as Db;

describe('relayLoop (the outbox relays)', () => {
  test('minGapMs: wake-ups during a pass share one more pass, started at least minGapMs after the first ended', async () => {
    const starts: number[] = [];
    const ends: number[] = [];
    const loop = relayLoop({
      db: NO_DB,
      name: 'test-relay',
      channels: [],
      intervalMs: 3_600_000,
      minGapMs: 150,
      pass: async () => {
        starts.push(Date.now());
        await new Promise((r) => setTimeout(r, 20));
        ends.push(Date.now());
        return [starts.length];
      },
    });
    try {
      const first = loop.sweep();
      for (let i = 0; i < 5; i++) loop.wake();
      expect(await first).toEqual([1, 2]);
      expect(starts).toHaveLength(2);
      expect(starts[1] - ends[0]).toBeGreaterThanOrEqual(140);
    } finally {
      await loop.stop();
    }
    // Stopped: no further pass.
    loop.wake();
    await new Promise((r) => setTimeout(r, 200));
    expect(starts).toHaveLength(2);
  });

  test('a failing pass is logged, not thrown by wake(); sweep() rejects with it', async () => {
    const loop = relayLoop({ db: NO_DB, name: 'test-relay', channels: [], intervalMs: 3_600_000, pass: async () => Promise.reject(new Error('database away')) });
    try {
      expect(() => loop.wake()).not.toThrow();
      await expect(loop.sweep()).rejects.toThrow('database away');
    } finally {
      await loop.stop();
    }
  });
});

describe('eachLimited', () => {
  test('every item once, never more than the limit at a time', async () => {
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    await eachLimited([...Array(20).keys()], 4, async (n) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 5 + (n % 3)));
      seen.push(n);
      running--;
    });
    expect(seen.sort((a, b) => a - b)).toEqual([...Array(20).keys()]);
    expect(most).toBe(4);
  });

  test('the first error is thrown once the items in flight settled; no new item starts after it', async () => {
    const started: number[] = [];
    let settled = 0;
    await expect(
      eachLimited([1, 2, 3, 4, 5, 6], 2, async (n) => {
        started.push(n);
        // Item 2 fails while item 1 still runs.
        await new Promise((r) => setTimeout(r, n === 2 ? 2 : 30));
        settled++;
        if (n === 2) throw new Error('item 2 failed');
      }),
    ).rejects.toThrow('item 2 failed');
    expect(started).toEqual([1, 2]);
    expect(settled).toBe(2);
    expect(await eachLimited([], 3, async () => undefined)).toBeUndefined();
  });
});
