import { singleFlight } from '../src/infra/single-flight';

describe('singleFlight (the relays\' sweeps)', () => {
  test('calls during a pass share its promise and ask for exactly one more pass; what each pass returned is answered', async () => {
    const gates: (() => void)[] = [];
    let passes = 0;
    const flight = singleFlight(async () => {
      const n = ++passes;
      await new Promise<void>((r) => gates.push(r));
      return [n];
    }, () => false);
    const a = flight.run();
    const b = flight.run();
    const c = flight.run();
    expect(b).toBe(a);
    expect(c).toBe(a);
    gates.shift()!(); // the first pass ends: one more runs (not two)
    while (gates.length === 0) await new Promise((r) => setTimeout(r, 1));
    gates.shift()!();
    expect(await a).toEqual([1, 2]);
    expect(passes).toBe(2);
    // Idle again: a new call starts a new pass.
    const d = flight.run();
    expect(d).not.toBe(a);
    while (gates.length === 0) await new Promise((r) => setTimeout(r, 1));
    gates.shift()!();
    expect(await d).toEqual([3]);
  });

  test('no further pass once stopped; settled() waits for the pass in flight and never throws', async () => {
    let stopped = false;
    let passes = 0;
    const flight = singleFlight(async () => {
      passes += 1;
      await new Promise((r) => setTimeout(r, 20));
      if (passes === 1) throw new Error('database gone');
      return [passes];
    }, () => stopped);
    const p = flight.run();
    void flight.run();
    stopped = true;
    await expect(p).rejects.toThrow('database gone');
    await flight.settled();
    expect(passes).toBe(1);
  });
});
