import type { Knex } from 'knex';
import { logger } from '../logger';

/**
 * `id_bounds` (migrations/20261208000010_id_bounds.ts): for each hour of a table's
 * `date_created`, rows holding bounds of the ids created in it, appended by the table's
 * triggers. Every row of the table has, among its hour's rows, one whose `min_id <= id <=
 * max_id`. A date range ordered by id reads where its page starts off them (src/db/list.ts,
 * datePage): the range's whole hours from here, its last (or first) partial hour off the
 * table's index, instead of an aggregate over every index entry of the range.
 */

export const HOUR_MS = 3_600_000;

/** A time's hour, as `id_bounds.bucket` holds it (the migration's HOUR_OF: `floor(epoch / 3600)`). */
export function hourOf(at: Date): number {
  return Math.floor(at.getTime() / HOUR_MS);
}

/** The first instant of an hour. */
export function hourStart(hour: number): Date {
  return new Date(hour * HOUR_MS);
}

/**
 * The widest bound the rows of `table`'s hours `from`..`to` (each end included when given)
 * hold: their greatest `max_id` (`max`) or least `min_id` (`min`), as a scalar subquery.
 * NULL when none of those hours has a row.
 */
export function hoursBound(db: Knex, table: string, bound: 'max' | 'min', from?: number, to?: number): Knex.QueryBuilder {
  const qb = db('id_bounds')
    .select(db.raw(bound === 'max' ? 'max(max_id)' : 'min(min_id)'))
    .where('tbl', table);
  if (from !== undefined) qb.where('bucket', '>=', from);
  if (to !== undefined) qb.where('bucket', '<=', to);
  return qb;
}

/** How often start:api folds each hour's rows into one (startIdBoundsFolding). */
export const FOLD_EVERY_MS = 60_000;

/**
 * Folds the rows of every hour that has several into one (their least `min_id` and greatest
 * `max_id`), in one statement: a read's snapshot sees the hour's rows either before or after.
 * Concurrent folds (N replicas run one each a minute) are safe: a row is deleted, and its
 * bounds carried over, by one of them only. Rows appended meanwhile stay for the next fold.
 * Resolves with the rows folded.
 */
export async function foldIdBounds(db: Knex): Promise<number> {
  const { rows } = await db.raw<{ rows: { folded: string }[] }>(
    `WITH many AS (SELECT tbl, bucket FROM id_bounds GROUP BY tbl, bucket HAVING count(*) > 1),
          gone AS (DELETE FROM id_bounds b USING many m WHERE b.tbl = m.tbl AND b.bucket = m.bucket RETURNING b.tbl, b.bucket, b.min_id, b.max_id),
          kept AS (INSERT INTO id_bounds (tbl, bucket, min_id, max_id) SELECT tbl, bucket, min(min_id), max(max_id) FROM gone GROUP BY tbl, bucket RETURNING 1)
     SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM kept) AS folded`,
  );
  return Number(rows[0].folded);
}

/**
 * Folds `id_bounds` every FOLD_EVERY_MS (a timer that keeps no process alive). With N replicas,
 * each folds: the statement is cheap when there is little to fold (an index-only pass over the
 * table's rows, a few per hour of history), and safe when two run at once (foldIdBounds).
 * Returns the stop function.
 */
export function startIdBoundsFolding(db: Knex, everyMs = FOLD_EVERY_MS): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    foldIdBounds(db)
      .catch((err) => {
        // Only tidiness is lost: the rows stay and bound the same ids.
        logger.warn({ err }, 'id_bounds fold failed');
      })
      .finally(() => {
        running = false;
      });
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
