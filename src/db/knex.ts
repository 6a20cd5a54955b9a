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

interface PooledConnection {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

/**
 * One statement on a connection of Knex's pool, as a named (server-side prepared) statement:
 * PostgreSQL parses and plans it once per connection, and Knex's builder and runner (and its
 * per-query work) are skipped; Knex's 'query' event is still emitted (a cheap no-op without
 * listeners), so what watches the statements a request sends sees this one too. For the hottest
 * statements only (reads, and the webhook relay's pass: one statement, its own transaction),
 * outside transactions; `text` uses PostgreSQL's $1 placeholders, and `name` is unique to that
 * text.
 */
export async function preparedRows<T>(db: Db, name: string, text: string, values: unknown[]): Promise<T[]> {
  db.emit('query', { method: 'raw', sql: text, bindings: values, name });
  const client = db.client as { acquireConnection(): Promise<PooledConnection>; releaseConnection(c: PooledConnection): Promise<void> };
  const conn = await client.acquireConnection();
  try {
    return (await conn.query({ name, text, values })).rows as T[];
  } finally {
    await client.releaseConnection(conn);
  }
}
