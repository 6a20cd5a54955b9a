import type { Knex } from 'knex';

/**
 * Refunds as records of their own (POST /payments/{id}/refunds): a payment's refund_total is
 * their sum. A payment that already carries a refund_total (set by hand before this) gets one
 * refund row of that amount, so the sum holds from the start and nothing is lost.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('payment_refunds', (t) => {
    t.bigIncrements('id');
    t.bigInteger('payment_id').notNullable().references('id').inTable('payments').onDelete('CASCADE');
    t.decimal('amount', 15, 4).notNullable();
    t.text('reason').notNullable().defaultTo('');
    t.string('gateway_refund_id', 255).nullable();
    t.boolean('membership_cancelled').notNullable().defaultTo(false);
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['payment_id', 'id']);
  });
  await knex.raw('ALTER TABLE payment_refunds ADD CONSTRAINT payment_refunds_amount_positive CHECK (amount > 0)');
  // A gateway's refund id names one refund of a payment: recorded twice (a webhook and a retry) is refused.
  await knex.raw('CREATE UNIQUE INDEX payment_refunds_gateway_refund_id_unique ON payment_refunds (payment_id, gateway_refund_id) WHERE gateway_refund_id IS NOT NULL');
  await knex.raw(`INSERT INTO payment_refunds (payment_id, amount, reason, date_created)
    SELECT id, refund_total, 'Recorded on the payment before refunds were records of their own.', date_modified
    FROM payments WHERE refund_total > 0`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('payment_refunds');
}
