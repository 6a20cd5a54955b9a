import type { Db } from './knex';

/*
 * What this file reads of the pool behind Knex (tarn.js, pinned by package-lock.json; the
 * resources' suites and test/pool.test.ts run every read and write through it): its free and
 * used resources and its queue of waiting acquires.
 */
interface TarnResource<C> {
  resource: C;
}
interface TarnPool<C> {
  destroyed?: boolean;
  free?: TarnResource<C>[];
  used?: TarnResource<C>[];
  pendingAcquires?: unknown[];
  pendingValidations?: unknown[];
  _startReaping?(): void;
}

/** What this file needs of a pooled connection: Knex marks one that broke, and one past its configured lifetime. */
interface KnexConnection {
  __knex__disposed?: unknown;
  __knexLifetimeLimit?: unknown;
}

interface PoolClient<C> {
  pool?: TarnPool<C>;
  acquireConnection(): Promise<C>;
  releaseConnection(conn: C): Promise<void>;
  /** Knex's check that the connection settings (a provider's) have not expired; absent for a fixed connection string. */
  connectionConfigExpirationChecker?: unknown;
  config: { pool?: { validate?: unknown } };
}

/**
 * A connection of Knex's pool, taken at once when one is idle and nobody waits. Knex's
 * `acquireConnection` goes through tarn's full acquire: two pending operations, each with a
 * timer for the acquire timeout, and an asynchronous validation, some 5% of what a GET one
 * allocated (issue 14). An idle connection needs none of it: it is checked as Knex's validation
 * checks it (not broken, not past a lifetime) and moved to the pool's used list, where
 * `releaseConnection` (and the pool's statistics) find it. Otherwise, or when the pool is
 * configured in a way this does not check (a validate hook, expiring connection settings),
 * Knex's own acquire, with its queue and timeout.
 */
export function takeConnection<C>(db: Db): Promise<C> {
  const client = db.client as unknown as PoolClient<C>;
  const pool = client.pool;
  if (
    pool &&
    !pool.destroyed &&
    Array.isArray(pool.free) &&
    Array.isArray(pool.used) &&
    pool.free.length > 0 &&
    pool.pendingAcquires?.length === 0 &&
    pool.pendingValidations?.length === 0 &&
    !client.connectionConfigExpirationChecker &&
    !client.config.pool?.validate
  ) {
    const free = pool.free[pool.free.length - 1];
    const conn = free.resource as C & KnexConnection;
    if (!conn.__knex__disposed && conn.__knexLifetimeLimit === undefined) {
      pool.free.pop();
      pool.used.push(free);
      pool._startReaping?.();
      return Promise.resolve(conn);
    }
  }
  return client.acquireConnection();
}

/** Gives a connection taken with takeConnection (or Knex's acquire) back to the pool. */
export function giveBack<C>(db: Db, conn: C): Promise<void> {
  return (db.client as unknown as PoolClient<C>).releaseConnection(conn);
}
