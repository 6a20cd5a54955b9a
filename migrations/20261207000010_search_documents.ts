import type { Knex } from 'knex';
import { SEARCHED, searchDocument } from './20261129000001_list_scale';

/**
 * Each searched table keeps its searched text in a column, `search_doc`: its searched columns,
 * each coalesced, joined by U+001F, lowercased (the expression 20261129000001_list_scale.ts
 * indexed, lowercased). A BEFORE trigger sets it on every insert and on every update of those
 * columns or of itself, and its GIN trigram index replaces the expression's.
 *
 * Why: a search's matches are decided by `search_doc LIKE lower('%term%')` (src/db/list.ts).
 * Before, PostgreSQL built the document and lowercased it (ILIKE) for every candidate row, in
 * the index's recheck, and then tested each column with ILIKE again: on 11,111 candidates that
 * was 12.3 ms of a 14 ms statement, against 4.1 ms reading the stored column.
 *
 * Built without holding writes off for long: the column is added without a default (no
 * rewrite), the trigger keeps every row written from then on, the rows already there are filled
 * in chunks of ids (each its own transaction), and the index is built CONCURRENTLY; so this
 * migration runs outside a transaction, and each step can run again (an index build cut short
 * is built again: createIndexConcurrently). The replaced index is
 * dropped last: a replica of the code before, still running during a rolling deploy, searches
 * without it until it is replaced.
 */
export const config = { transaction: false };

/** table -> its searched columns, in the order of the list's `searchable`: the tables whose expression 20261129000001_list_scale.ts indexed. */
export const SEARCH_DOCUMENTS: Readonly<Record<string, string[]>> = SEARCHED;

/** Ids filled per statement: about a second's work each on a table of a million rows. */
const FILL_CHUNK = 50_000;

/** The expression list_scale indexed, over `row`'s columns (`NEW.` in the trigger), lowercased. */
const documentOf = (columns: string[], row = '') => `lower${searchDocument(columns.map((c) => `${row}${c}`))}`;

export async function up(knex: Knex): Promise<void> {
  for (const [table, columns] of Object.entries(SEARCH_DOCUMENTS)) {
    await knex.raw(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS search_doc text`);
    await knex.raw(`CREATE OR REPLACE FUNCTION hostflow_search_doc_${table}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  NEW.search_doc := ${documentOf(columns, 'NEW.')};
  RETURN NEW;
END
$fn$`);
    await knex.transaction(async (trx) => {
      await trx.raw(`DROP TRIGGER IF EXISTS ${table}_search_doc ON ${table}`);
      await trx.raw(
        `CREATE TRIGGER ${table}_search_doc BEFORE INSERT OR UPDATE OF ${[...columns, 'search_doc'].join(', ')} ON ${table} FOR EACH ROW EXECUTE FUNCTION hostflow_search_doc_${table}()`,
      );
    });
    // The rows written before the trigger (the trigger computes the value).
    const filled = await fillSearchDocs(knex, table, documentOf(columns));
    await createIndexConcurrently(knex, `${table}_search_doc_trgm`, `${table} USING gin (search_doc gin_trgm_ops)`);
    await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${table}_search_trgm`);
    // Statistics of the new column, for the planner's estimate of a search; and, after a fill, the dead rows it left.
    await knex.raw(filled ? `VACUUM ANALYZE ${table}` : `ANALYZE ${table}`);
  }
}

/**
 * `CREATE INDEX CONCURRENTLY name ON definition`, unless a valid index of that name exists. A
 * build cut short (the process killed during a deploy, a lost connection) leaves an invalid
 * index of that name, which `IF NOT EXISTS` would keep and no query can use: it is dropped
 * and built again.
 */
export async function createIndexConcurrently(knex: Knex, name: string, definition: string): Promise<void> {
  const { rows } = await knex.raw<{ rows: { valid: boolean }[] }>('SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass(?)', [name]);
  if (rows[0]?.valid) return;
  if (rows[0]) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  await knex.raw(`CREATE INDEX CONCURRENTLY ${name} ON ${definition}`);
}

/**
 * Sets `search_doc` to `value` (SQL) in `table`'s rows that have none, FILL_CHUNK ids at a time,
 * each chunk its own transaction (the migration runs outside one). Whether there were any.
 */
export async function fillSearchDocs(knex: Knex, table: string, value: string): Promise<boolean> {
  const { rows } = await knex.raw<{ rows: { lo: string | null; hi: string | null }[] }>(`SELECT min(id) AS lo, max(id) AS hi FROM ${table} WHERE search_doc IS NULL`);
  if (rows[0].lo === null || rows[0].hi === null) return false;
  const [lo, hi] = [Number(rows[0].lo), Number(rows[0].hi)];
  for (let from = lo; from <= hi; from += FILL_CHUNK) {
    await knex.raw(`UPDATE ${table} SET search_doc = ${value} WHERE id >= ? AND id < ? AND search_doc IS NULL`, [from, from + FILL_CHUNK]);
  }
  return true;
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, columns] of Object.entries(SEARCH_DOCUMENTS)) {
    await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${table}_search_trgm ON ${table} USING gin (${searchDocument(columns)} gin_trgm_ops)`);
    await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${table}_search_doc_trgm`);
    await knex.raw(`DROP TRIGGER IF EXISTS ${table}_search_doc ON ${table}`);
    await knex.raw(`DROP FUNCTION IF EXISTS hostflow_search_doc_${table}()`);
    await knex.raw(`ALTER TABLE ${table} DROP COLUMN IF EXISTS search_doc`);
  }
}
