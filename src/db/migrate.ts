import pg from 'pg';
import { migrationSource } from '../../migrations';
import { logger } from '../logger';
import type { Db } from './knex';

/** How long a process waits for another one's migrations (a large table's index can take minutes). */
const LOCK_WAIT_MS = 15 * 60_000;
/** The advisory lock every hostflow process takes to migrate (any constant unique to hostflow). */
const MIGRATION_LOCK_KEY = 0x686f7374; // "host"

/**
 * Brings the schema up to date. N replicas may start at once: knex's own lock row cannot stop
 * two processes racing to create its tables on an empty database (one fails on a duplicate
 * table), so the processes first take a PostgreSQL advisory lock, on a connection of their own
 * (not one of the pool's, which the migrations need), and wait their turn; the next finds
 * nothing left to apply. The advisory lock goes with its session: a process that dies while
 * migrating frees it. Knex's lock row does not free itself: a row left locked (a crash in an
 * earlier version, or `knex migrate` run by hand) is waited for up to LOCK_WAIT_MS, then the
 * error says how to free it.
 */
export async function migrateLatest(db: Db, opts: { lockWaitMs?: number; pollMs?: number } = {}): Promise<string[]> {
  const deadline = Date.now() + (opts.lockWaitMs ?? LOCK_WAIT_MS);
  const poll = opts.pollMs ?? 250;
  const connection = (db.client.config as { connection?: pg.ClientConfig }).connection;
  const lock = new pg.Client({ ...connection, application_name: 'hostflow-migrate' });
  await lock.connect();
  try {
    for (let wait = poll; ; wait = Math.min(wait * 2, 5000)) {
      const { rows } = await lock.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [MIGRATION_LOCK_KEY]);
      if (rows[0].ok) break;
      if (Date.now() + wait > deadline) throw new Error('Another process has been migrating the database for too long; try again when it is done.');
      logger.info({ retry_in_ms: wait }, 'another process is migrating the database; waiting');
      await new Promise((r) => setTimeout(r, wait));
    }
    for (let wait = poll; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
        return applied;
      } catch (err) {
        if ((err as Error).name !== 'MigrationLocked') throw err;
        if (Date.now() + wait > deadline) {
          throw new Error(
            "The database's migration lock (knex_migrations_lock) is held and no hostflow process is migrating. " +
              'When no `knex migrate` runs either, free it with: UPDATE knex_migrations_lock SET is_locked = 0;',
          );
        }
        logger.info({ retry_in_ms: wait }, 'the migration lock row is held; waiting');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  } finally {
    await lock.end();
  }
}
