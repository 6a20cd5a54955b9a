import type { Knex } from 'knex';

/**
 * The memberships list filters date_trial_end and date_renewed by range (what a trial-end or
 * renewal job selects by; date_expiration has its index since the list-scale migration): an
 * index (column, id) each, built CONCURRENTLY so that writes go on while a large table is
 * indexed (hence outside a transaction; IF NOT EXISTS makes a rerun after a crash safe).
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  for (const column of ['date_trial_end', 'date_renewed']) {
    await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS memberships_${column}_id_idx ON memberships (${column}, id)`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const column of ['date_trial_end', 'date_renewed']) await knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS memberships_${column}_id_idx`);
}
