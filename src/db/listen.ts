import pg from 'pg';
import { singleFlight } from '../infra/single-flight';
import { logger } from '../logger';
import type { Db } from './knex';

export interface Listener {
  stop(): Promise<void>;
}

/** The connection string of a Knex instance (a LISTEN needs a connection of its own, outside the pool). */
export function connectionString(db: Db): string {
  const conn = (db.client as { config: { connection: unknown } }).config.connection;
  const url = typeof conn === 'string' ? conn : (conn as { connectionString?: string }).connectionString;
  if (!url) throw new Error('the database connection has no connection string');
  return url;
}

/**
 * LISTEN on `channel` over a connection of its own: `onNotify` runs for each notification,
 * and once each time the listener (re)connects, since notifications sent while it was away
 * are lost. A lost connection is opened again after `retryMs`.
 */
export function listen(db: Db, channel: string, onNotify: () => void, opts: { name: string; retryMs?: number }): Listener {
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
  const log = logger.child({ component: opts.name });
  const retryMs = opts.retryMs ?? 2000;
  const url = connectionString(db);
  let stopped = false;
  let client: pg.Client | null = null;
  let timer: NodeJS.Timeout | undefined;

  const again = () => {
    if (!stopped) timer = setTimeout(() => void open(), retryMs).unref();
  };
  const open = async () => {
    if (stopped) return;
    const c = new pg.Client({ connectionString: url, application_name: `hostflow-${opts.name}` });
    c.on('notification', () => onNotify());
    // A lost connection says so with 'error', also when it was closed cleanly under it (pg turns
    // an 'end' it did not ask for into 'Connection terminated unexpectedly'; tested).
    const lost = (err?: Error) => {
      if (client !== c) return;
      log.warn({ err }, 'listener connection lost; reconnecting');
      client = null;
      c.end().catch(() => undefined);
      again();
    };
    c.on('error', lost);
    try {
      await c.connect();
      await c.query(`LISTEN ${channel}`);
      if (stopped) {
        await c.end().catch(() => undefined);
        return;
      }
      client = c;
      onNotify();
    } catch (err) {
      log.warn({ err }, 'listener could not connect; retrying');
      await c.end().catch(() => undefined);
      again();
    }
  };
  void open();

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      const c = client;
      client = null;
      await c?.end().catch(() => undefined);
    },
  };
}

export interface RelayLoop<T> {
  /** One pass now, or the one in flight and one more after it (tests, and the wake-ups). */
  sweep(): Promise<T[]>;
  /** A pass soon; a failure is logged and the next wake-up tries again. */
  wake(): void;
  readonly stopped: boolean;
  /** No further pass; waits for the one in flight. */
  stop(): Promise<void>;
}

/**
 * The loop of an outbox relay: `pass` runs one at a time (a wake-up during a pass runs one more
 * after it, `minGapMs` after it at the soonest), woken by NOTIFY on `channels` (and when a
 * listener reconnects), by `wake()` and every `intervalMs`, which catches what a lost listener
 * missed.
 */
export function relayLoop<T>(opts: { db: Db; name: string; channels: string[]; intervalMs: number; pass: () => Promise<T[]>; minGapMs?: number }): RelayLoop<T> {
  const log = logger.child({ component: opts.name });
  let stopped = false;
  // With minGapMs, a pass starts at least that long after the previous one ended: under a stream
  // of commits the NOTIFYs of that gap share one pass instead of passes running back to back.
  let lastEnd = 0;
  const spaced = async (): Promise<T[]> => {
    const wait = lastEnd + (opts.minGapMs ?? 0) - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    try {
      return await opts.pass();
    } finally {
      lastEnd = Date.now();
    }
  };
  const flight = singleFlight(spaced, () => stopped);
  const wake = () => {
    if (stopped) return;
    flight.run().catch((err: Error) => log.warn({ err: err.message }, `${opts.name} pass failed; the next one retries`));
  };
  const listeners = opts.channels.map((channel) => listen(opts.db, channel, wake, { name: opts.channels.length > 1 ? `${opts.name}-${channel}` : opts.name }));
  const timer = setInterval(wake, opts.intervalMs);
  timer.unref();
  return {
    sweep: flight.run,
    wake,
    get stopped() {
      return stopped;
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.all(listeners.map((listener) => listener.stop()));
      await flight.settled();
    },
  };
}
