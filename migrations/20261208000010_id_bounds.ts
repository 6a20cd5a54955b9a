import type { Knex } from 'knex';

/**
 * `id_bounds`: for each hour of `date_created`, bounds of the ids of the rows created in it, so
 * that a date range ordered by id finds where its page starts without reading the range
 * (src/db/list.ts, datePage). Until now that start, the range's greatest (or least) id, was
 * an aggregate over the range's index entries: 28,800 of them for a month of a million
 * payments, 5 ms of a statement's 7.
 *
 * A row per write statement and hour (an hour is `floor(epoch / 3600)`, whatever the session's
 * time zone): the least and the greatest id it wrote there. Append-only, as `row_counts`
 * (20261129000001_list_scale.ts): a write never updates a shared row, so concurrent writes
 * never wait on each other. Kept by two triggers:
 * - after an INSERT statement: its rows, grouped by hour (one row for a bulk load's hour);
 * - after an UPDATE of a row's `date_created` that changed it: the row's id in its new hour.
 *
 * The bounds only ever widen: a row deleted, or moved to another hour, leaves its old hour's
 * bound as it was. So for every row, its hour's rows hold a `min_id <= id <= max_id`: what a
 * range's greatest id is found from is never below it (a bound too wide only costs the list its
 * fallback). Many rows of one hour are folded into one now and then (src/db/id-bounds.ts).
 *
 * Each table's triggers are created, and its rows bounded, in one transaction that holds off
 * writes to it (a scan of the table; about a second for a million rows). The migration itself
 * runs outside a transaction, for its closing VACUUM (which lets the bounds be read off their
 * index alone); each step can run again.
 */
export const config = { transaction: false };

/** The tables bounded (their lists say so: ListSpec.idBounds). */
export const ID_BOUNDED = ['customers', 'memberships', 'payments', 'sites'];

/** The hour of a `date_created`, as `id_bounds.bucket` holds it (src/db/id-bounds.ts: hourOf). */
export const HOUR_OF = (column: string) => `floor(extract(epoch from ${column}) / 3600)::bigint`;

const INSERT_FUNCTION = `
CREATE OR REPLACE FUNCTION hostflow_id_bounds_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO id_bounds (tbl, bucket, min_id, max_id)
    SELECT TG_TABLE_NAME, ${HOUR_OF('date_created')}, min(id), max(id) FROM new_rows WHERE date_created IS NOT NULL GROUP BY 2;
  RETURN NULL;
END
$fn$`;

const UPDATE_FUNCTION = `
CREATE OR REPLACE FUNCTION hostflow_id_bounds_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO id_bounds (tbl, bucket, min_id, max_id) VALUES (TG_TABLE_NAME, ${HOUR_OF('NEW.date_created')}, NEW.id, NEW.id);
  RETURN NULL;
END
$fn$`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE IF NOT EXISTS id_bounds (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tbl text NOT NULL,
    bucket bigint NOT NULL,
    min_id bigint NOT NULL,
    max_id bigint NOT NULL
  )`);
  await knex.raw('CREATE INDEX IF NOT EXISTS id_bounds_bucket_idx ON id_bounds (tbl, bucket) INCLUDE (min_id, max_id)');
  await knex.raw(INSERT_FUNCTION);
  await knex.raw(UPDATE_FUNCTION);
  for (const table of ID_BOUNDED) {
    await knex.transaction(async (trx) => {
      // No write to the table between its bounds and its triggers.
      await trx.raw(`LOCK TABLE ${table} IN SHARE ROW EXCLUSIVE MODE`);
      await trx.raw(`DROP TRIGGER IF EXISTS ${table}_id_bounds_insert ON ${table}`);
      await trx.raw(`CREATE TRIGGER ${table}_id_bounds_insert AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hostflow_id_bounds_insert()`);
      await trx.raw(`DROP TRIGGER IF EXISTS ${table}_id_bounds_update ON ${table}`);
      await trx.raw(
        `CREATE TRIGGER ${table}_id_bounds_update AFTER UPDATE OF date_created ON ${table} FOR EACH ROW WHEN (NEW.date_created IS NOT NULL AND OLD.date_created IS DISTINCT FROM NEW.date_created) EXECUTE FUNCTION hostflow_id_bounds_update()`,
      );
      await trx('id_bounds').where({ tbl: table }).delete();
      await trx.raw(`INSERT INTO id_bounds (tbl, bucket, min_id, max_id) SELECT ?, ${HOUR_OF('date_created')}, min(id), max(id) FROM ${table} WHERE date_created IS NOT NULL GROUP BY 2`, [table]);
    });
  }
  await knex.raw('VACUUM ANALYZE id_bounds');
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ID_BOUNDED) {
    await knex.raw(`DROP TRIGGER IF EXISTS ${table}_id_bounds_insert ON ${table}`);
    await knex.raw(`DROP TRIGGER IF EXISTS ${table}_id_bounds_update ON ${table}`);
  }
  await knex.raw('DROP FUNCTION IF EXISTS hostflow_id_bounds_insert()');
  await knex.raw('DROP FUNCTION IF EXISTS hostflow_id_bounds_update()');
  await knex.raw('DROP TABLE IF EXISTS id_bounds');
}
