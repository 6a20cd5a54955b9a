import type { Knex } from 'knex';

/**
 * Lifecycle starts deferred to a horizon (issue 18, README "Billing: renewals"): a recurring
 * membership whose next due date is more than BILLING_LIFECYCLE_HORIZON_HOURS away gets its
 * lifecycle workflow only when that date comes within the horizon. `lifecycle_deferred_due` is
 * that due date while the start waits (null otherwise); the sweep beside every worker reads the
 * partial index in due order, so it costs what is coming due, never the whole table.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('memberships', (t) => {
    t.timestamp('lifecycle_deferred_due', { useTz: true }).nullable();
  });
  await knex.raw('CREATE INDEX memberships_lifecycle_deferred_idx ON memberships (lifecycle_deferred_due) WHERE lifecycle_deferred_due IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS memberships_lifecycle_deferred_idx');
  await knex.schema.alterTable('memberships', (t) => {
    t.dropColumn('lifecycle_deferred_due');
  });
}
