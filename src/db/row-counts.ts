import type { Knex } from 'knex';
import { logger } from '../logger';

/** Delta rows of one key past which a read folds them into one (in the background). */
const FOLD_AFTER = 64;

/**
 * Exact row counts kept by the tables' statement triggers (migrations/20261129000001_list_scale.ts)
 * in `row_counts`: each write statement appends its delta, in its own transaction, so a count
 * read here is exactly what that snapshot holds, whatever the table's size. `key` is '' for the
 * whole table, `column=value` for a counted column.
 */
export async function readRowCount(db: Knex, table: string, key: string): Promise<number> {
  const { rows } = await db.raw('SELECT coalesce(sum(n), 0)::bigint AS n, count(*)::int AS deltas FROM row_counts WHERE tbl = ? AND key = ?', [table, key]);
  const { n, deltas } = rows[0] as { n: string; deltas: number };
  if (deltas > FOLD_AFTER) void foldRowCount(db, table, key);
  return Number(n);
}

/**
 * Folds a key's deltas into one row, in one statement. Concurrent folds (any replica) are
 * safe: a delta row is deleted (and summed) by one of them only, and a reader's snapshot sees
 * the deltas either before or after.
 */
export async function foldRowCount(db: Knex, table: string, key: string): Promise<void> {
  try {
    await db.raw(
      `WITH d AS (DELETE FROM row_counts WHERE tbl = ? AND key = ? RETURNING n)
       INSERT INTO row_counts (tbl, key, n) SELECT ?, ?, sum(n) FROM d HAVING count(*) > 0`,
      [table, key, table, key],
    );
  } catch (err) {
    // Only tidiness is lost: the deltas stay and sum to the same count.
    logger.warn({ err, table, key }, 'row count fold failed');
  }
}
