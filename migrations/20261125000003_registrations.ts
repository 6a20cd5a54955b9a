import type { Knex } from 'knex';

/**
 * Registrations (/register): one row per register workflow, keyed by the workflow id. The
 * saga's activities record here the rows they created, in the same transaction as the insert,
 * so a retried activity finds its earlier row instead of inserting a second one, and the
 * compensations know exactly what to delete. No foreign keys: a compensation deletes the
 * records and clears the ids, the row stays as the audit trail of the attempt.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('registrations', (t) => {
    t.text('workflow_id').primary();
    t.text('idempotency_key_sha256').nullable();
    t.text('request_sha256').notNullable();
    t.text('status').notNullable().defaultTo('running');
    t.bigInteger('user_id').nullable();
    t.boolean('created_user').notNullable().defaultTo(false);
    t.bigInteger('customer_id').nullable();
    t.boolean('created_customer').notNullable().defaultTo(false);
    t.bigInteger('membership_id').nullable();
    t.bigInteger('payment_id').nullable();
    t.bigInteger('site_id').nullable();
    t.jsonb('result').nullable();
    t.jsonb('error').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw("ALTER TABLE registrations ADD CONSTRAINT registrations_status_check CHECK (status IN ('running','completed','failed'))");
  await knex.raw('CREATE INDEX registrations_idempotency_idx ON registrations (idempotency_key_sha256) WHERE idempotency_key_sha256 IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('registrations');
}
