import type { Knex } from 'knex';

/**
 * Lists that cost the same at a million rows as at a hundred (src/http/list.ts):
 *
 * - An index `(column, id)` for every column a list filters or orders by, so a filter with
 *   the default order (`id desc`), an order by any whitelisted column, and a keyset page
 *   after a cursor are each one ordered index range scan that stops after the page. One
 *   trigram index per searched table, over all its searched columns.
 * - `row_counts`: exact row counts kept by triggers in the writing transaction, for
 *   the unfiltered lists and the counted filters (`X-WP-Total` without `count(*)`). Append-only
 *   deltas: a write inserts its delta (never updates a shared row, so concurrent writes never
 *   wait for each other or deadlock); a read sums them and folds them into one row now and
 *   then (src/http/list-counts.ts).
 *
 * The indexes are built CONCURRENTLY (writes go on while a large table is indexed), so this
 * migration runs outside a transaction; each statement is idempotent (IF NOT EXISTS), and the
 * counts are set up in a transaction of their own that holds off writes to their table.
 */
export const config = { transaction: false };

/** table -> columns (each indexed with id). */
const INDEXED: Record<string, string[]> = {
  users: ['username', 'email', 'display_name'],
  customers: ['type', 'has_trialed', 'signup_form', 'date_registered', 'last_login', 'date_modified'],
  memberships: ['amount', 'date_modified', 'date_expiration', 'gateway', 'auto_renew', 'currency', 'duration_unit'],
  payments: ['total', 'date_modified', 'product_id', 'gateway', 'currency'],
  sites: ['title', 'domain', 'path', 'template_id', 'active', 'public', 'archived', 'date_created', 'date_modified'],
};

/**
 * table -> its searched columns, in the order of the list's `searchable`: one trigram index
 * over all of them (the expression src/http/list.ts searches: each column coalesced, joined
 * by U+001F), one index scan per search instead of one per column. It replaces the
 * per-column ones.
 */
export const SEARCHED: Record<string, string[]> = {
  users: ['username', 'email', 'display_name'],
  memberships: ['gateway_subscription_id', 'gateway_customer_id', 'gateway'],
  payments: ['gateway_payment_id', 'gateway'],
  sites: ['title', 'domain', 'description'],
  products: ['name', 'slug', 'description'],
  chat_sessions: ['customer_name', 'customer_email', 'page_url', 'page_title'],
  translation_projects: ['slug', 'name'],
  translation_jobs: ['slug', 'locale'],
};
const REPLACED_TRIGRAM_INDEXES = ['users_username_trgm', 'users_email_trgm', 'users_display_name_trgm', 'sites_title_trgm', 'sites_domain_trgm', 'products_name_trgm'];

export const searchDocument = (columns: string[]) => `(${columns.map((c) => `coalesce(${c}, '')`).join(' || chr(31) || ')})`;

/** Counted tables -> the columns whose values are counted too (the filters kept exact). */
export const COUNTED: Record<string, string[]> = {
  customers: [],
  memberships: ['status'],
  payments: ['status'],
  sites: ['type'],
};

const TRIGGER_FUNCTION = `
CREATE OR REPLACE FUNCTION hostflow_count_rows() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  col text;
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM row_counts WHERE tbl = TG_TABLE_NAME;
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO row_counts (tbl, key, n) SELECT TG_TABLE_NAME, '', count(*) FROM new_rows HAVING count(*) > 0;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO row_counts (tbl, key, n) SELECT TG_TABLE_NAME, '', -count(*) FROM old_rows HAVING count(*) > 0;
  END IF;
  -- Per counted column (the trigger's arguments): +1 for each new value, -1 for each old one.
  FOREACH col IN ARRAY coalesce(TG_ARGV, '{}'::text[]) LOOP
    EXECUTE format(
      'INSERT INTO row_counts (tbl, key, n) SELECT $1, %L || ''='' || %I::text, %s count(*) FROM %I WHERE %I IS NOT NULL GROUP BY %I',
      col, col, CASE TG_OP WHEN 'INSERT' THEN '' ELSE '-' END, CASE TG_OP WHEN 'INSERT' THEN 'new_rows' ELSE 'old_rows' END, col, col)
    USING TG_TABLE_NAME;
  END LOOP;
  RETURN NULL;
END
$fn$`;

/** A row whose counted column changed (a row trigger, fired only then: most updates set other columns). */
const CHANGE_FUNCTION = `
CREATE OR REPLACE FUNCTION hostflow_count_row_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  col text;
  before text;
  after text;
BEGIN
  FOREACH col IN ARRAY coalesce(TG_ARGV, '{}'::text[]) LOOP
    EXECUTE format('SELECT ($1).%I::text, ($2).%I::text', col, col) INTO before, after USING OLD, NEW;
    IF before IS DISTINCT FROM after THEN
      INSERT INTO row_counts (tbl, key, n)
        SELECT TG_TABLE_NAME, col || '=' || v, d FROM (VALUES (before, -1), (after, 1)) AS c(v, d) WHERE v IS NOT NULL;
    END IF;
  END LOOP;
  RETURN NULL;
END
$fn$`;

export async function up(knex: Knex): Promise<void> {
  for (const [table, columns] of Object.entries(INDEXED)) {
    for (const column of columns) {
      await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${table}_${column}_id_idx ON ${table} (${column}, id)`);
    }
  }
  for (const [table, columns] of Object.entries(SEARCHED)) {
    await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${table}_search_trgm ON ${table} USING gin (${searchDocument(columns)} gin_trgm_ops)`);
  }
  for (const index of REPLACED_TRIGRAM_INDEXES) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);

  await knex.raw(`CREATE TABLE IF NOT EXISTS row_counts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tbl text NOT NULL,
    key text NOT NULL,
    n bigint NOT NULL
  )`);
  await knex.raw('CREATE INDEX IF NOT EXISTS row_counts_key_idx ON row_counts (tbl, key) INCLUDE (n)');
  await knex.raw(TRIGGER_FUNCTION);
  await knex.raw(CHANGE_FUNCTION);
  for (const [table, columns] of Object.entries(COUNTED)) {
    await knex.transaction(async (trx) => {
      // No write to the table between its count and its triggers.
      await trx.raw(`LOCK TABLE ${table} IN SHARE ROW EXCLUSIVE MODE`);
      const args = columns.map((c) => `'${c}'`).join(', ');
      const triggers: [name: string, when: string, fn: string][] = [
        ['insert', 'AFTER INSERT ON %t REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT', `hostflow_count_rows(${args})`],
        ['delete', 'AFTER DELETE ON %t REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT', `hostflow_count_rows(${args})`],
        ['truncate', 'AFTER TRUNCATE ON %t FOR EACH STATEMENT', 'hostflow_count_rows()'],
      ];
      if (columns.length > 0) {
        const changed = columns.map((c) => `OLD.${c} IS DISTINCT FROM NEW.${c}`).join(' OR ');
        triggers.push(['update', `AFTER UPDATE OF ${columns.join(', ')} ON %t FOR EACH ROW WHEN (${changed})`, `hostflow_count_row_change(${args})`]);
      }
      for (const [name, when, fn] of triggers) {
        await trx.raw(`DROP TRIGGER IF EXISTS ${table}_count_${name} ON ${table}`);
        await trx.raw(`CREATE TRIGGER ${table}_count_${name} ${when.replace('%t', table)} EXECUTE FUNCTION ${fn}`);
      }
      await trx('row_counts').where({ tbl: table }).delete();
      await trx.raw(`INSERT INTO row_counts (tbl, key, n) SELECT ?, '', count(*) FROM ${table}`, [table]);
      for (const c of columns) {
        await trx.raw(`INSERT INTO row_counts (tbl, key, n) SELECT ?, ? || '=' || ${c}::text, count(*) FROM ${table} WHERE ${c} IS NOT NULL GROUP BY ${c}`, [table, c]);
      }
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of Object.keys(COUNTED)) {
    for (const op of ['insert', 'delete', 'update', 'truncate']) await knex.raw(`DROP TRIGGER IF EXISTS ${table}_count_${op} ON ${table}`);
  }
  await knex.raw('DROP FUNCTION IF EXISTS hostflow_count_rows()');
  await knex.raw('DROP FUNCTION IF EXISTS hostflow_count_row_change()');
  await knex.raw('DROP TABLE IF EXISTS row_counts');
  for (const table of Object.keys(SEARCHED)) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${table}_search_trgm`);
  for (const index of REPLACED_TRIGRAM_INDEXES) {
    const [table, column] = /^(users|sites|products)_(.+)_trgm$/.exec(index)!.slice(1);
    await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index} ON ${table} USING gin (${column} gin_trgm_ops)`);
  }
  for (const [table, columns] of Object.entries(INDEXED)) {
    for (const column of columns) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${table}_${column}_id_idx`);
  }
}
