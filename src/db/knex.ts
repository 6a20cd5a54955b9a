import knexFactory, { Knex } from 'knex';
import pg from 'pg';
import { logger } from '../logger';
import { fastTimestamptzParser } from './timestamps';

// bigint (count(*), bigserial ids) as JS numbers: ids stay far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10));
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, fastTimestamptzParser(pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ)));
// numeric stays a string here; money is converted with decimal-safe code at the edges.

export type Db = Knex;

export function createDb(connectionString: string, poolMax = 10): Db {
  return knexFactory({
    client: 'pg',
    connection: { connectionString, application_name: 'hostflow' },
    pool: { min: 0, max: poolMax, idleTimeoutMillis: 30_000 },
    acquireConnectionTimeout: 10_000,
    // Knex's own warnings (a connection lost, an acquire that failed) as log lines, not console output.
    log: {
      warn: (m: unknown) => logger.warn({ component: 'knex' }, String(m)),
      error: (m: unknown) => logger.error({ component: 'knex' }, String(m)),
      deprecate: (m: unknown) => logger.warn({ component: 'knex' }, String(m)),
      debug: (m: unknown) => logger.debug({ component: 'knex' }, String(m)),
    },
  });
}

/** Pool statistics for /metrics. */
export function poolStats(db: Db): { used: number; free: number; pending: number; max: number } {
  // tarn.js pool behind knex
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number; max: number } }).pool;
  if (!pool) return { used: 0, free: 0, pending: 0, max: 0 };
  return { used: pool.numUsed(), free: pool.numFree(), pending: pool.numPendingAcquires(), max: pool.max };
}
