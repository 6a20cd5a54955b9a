import type { Knex } from 'knex';

/**
 * Plan changes (issue 18): a change asked for at the period's end waits in `scheduled_change`
 * (null when none), and the credit a downgrade leaves in `credit_balance`, which later renewals
 * take before they charge (never below zero).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('memberships', (t) => {
    t.jsonb('scheduled_change').nullable();
    t.decimal('credit_balance', 15, 4).notNullable().defaultTo(0);
  });
  await knex.raw('ALTER TABLE memberships ADD CONSTRAINT memberships_credit_balance_check CHECK (credit_balance >= 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('memberships', (t) => {
    t.dropColumn('scheduled_change');
    t.dropColumn('credit_balance');
  });
}
