import type { Knex } from 'knex';
import { logger } from '../logger';

/** Delta rows of one key past which a read folds them into one (in the background). */
const FOLD_AFTER = 64;

/**
 * Exact row counts kept by the tables' statement triggers (migrations/20261129000001_list_scale.ts)
 * in `row_counts`: each write statement appends its delta, in its own transaction, so a count
 * read here is exactly what that snapshot holds, whatever the table's size. A key is '' for
 * the whole table, `column=value` for a counted column.
 *
 * The statement that reads the count of `keys` (summed: a filter `__in` several values), as a
 * scalar subquery can hold it: one JSON array, [count, delta rows read]. A list runs it inside
 * its page's query (src/db/list.ts), so the page and its count are one round trip.
 */
export function rowCountStatement(table: string, keys: string[]): { sql: string; bindings: string[] } {
  return {
    sql: `SELECT json_build_array(coalesce(sum(n), 0), count(*)) FROM row_counts WHERE tbl = ? AND key IN (${keys.map(() => '?').join(', ')})`,
    bindings: [table, ...keys],
  };
}

/** After a read of `keys` that met `deltas` delta rows: folds them when there are many (in the background). */
export function foldWhenMany(db: Knex, table: string, keys: string[], deltas: number): void {
  if (deltas <= FOLD_AFTER * keys.length) return;
  for (const key of keys) void foldRowCount(db, table, key);
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
