/**
 * One pass at a time: a call while a pass runs asks for one more pass after it (however many
 * calls came meanwhile) and gets the same promise, which holds what every pass returned. The
 * relays run their passes with it (relayLoop, src/db/listen.ts): a NOTIFY during a sweep is never lost
 * and never runs a second sweep beside the first. `stopped`: no further pass once it says so.
 */
export function singleFlight<T>(pass: () => Promise<T[]>, stopped: () => boolean): { run: () => Promise<T[]>; settled: () => Promise<void> } {
  let running: Promise<T[]> | null = null;
  let again = false;
  const run = (): Promise<T[]> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        let out = await pass();
        while (again && !stopped()) {
          again = false;
          out = out.concat(await pass());
        }
        return out;
      } finally {
        running = null;
      }
    })();
    return running;
  };
  return { run, settled: async () => void (await running?.catch(() => undefined)) };
}
