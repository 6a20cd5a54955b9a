import type { Db } from '../db/knex';
import { logger } from '../logger';
import { pruneEvents } from './service';

const BATCH = 5000;

/**
 * Deletes events older than `days`, every `intervalMs`, in batches of short transactions. It
 * runs beside every worker process: with N replicas the sweeps overlap harmlessly (SKIP LOCKED
 * hands each batch to one of them, and a deleted row is simply not found again).
 */
export function startEventRetention(opts: { db: Db; days: number; intervalMs?: number; batch?: number }): { stop(): Promise<void>; sweep(): Promise<number> } {
  let running: Promise<number> | null = null;
  const sweep = (): Promise<number> =>
    (running ??= (async () => {
      const before = new Date(Date.now() - opts.days * 86_400_000);
      const batch = opts.batch ?? BATCH;
      let total = 0;
      for (;;) {
        const n = await pruneEvents(opts.db, before, batch);
        total += n;
        if (n < batch) return total;
      }
    })().finally(() => {
      running = null;
    }));
  const tick = () => {
    sweep().catch((err: Error) => logger.warn({ err: err.message }, 'old events could not be removed; the next sweep retries'));
  };
  const timer = setInterval(tick, opts.intervalMs ?? 600_000);
  timer.unref();
  tick();
  return {
    sweep,
    async stop() {
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
