import type { Knex } from 'knex';

/**
 * Renewals (issue 18): a renewal payment names the billing period it pays for
 * (`renewal_period_start`: the membership's due date it was created at), unique per membership,
 * so a retried activity, a killed worker or a racing API call can never create two for one
 * period; and a membership keeps the id of its lifecycle workflow (like domains and tenants
 * keep theirs). The unique index is built CONCURRENTLY (writes go on), hence outside a
 * transaction; IF NOT EXISTS makes a rerun after a crash safe.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE payments ADD COLUMN IF NOT EXISTS renewal_period_start timestamptz NULL');
  await knex.raw('ALTER TABLE memberships ADD COLUMN IF NOT EXISTS workflow_id text NULL');
  await knex.raw(
    'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS payments_renewal_period_unique ON payments (membership_id, renewal_period_start) WHERE renewal_period_start IS NOT NULL',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS payments_renewal_period_unique');
  await knex.raw('ALTER TABLE memberships DROP COLUMN IF EXISTS workflow_id');
  await knex.raw('ALTER TABLE payments DROP COLUMN IF EXISTS renewal_period_start');
}
