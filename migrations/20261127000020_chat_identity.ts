import type { Knex } from 'knex';

/**
 * Whether a chat session's (and its ticket's) customer is proven: customer_id with a matching
 * customer_hash, or a session an agent started. Otherwise name, e-mail and site are the
 * visitor's own claims, and agents are told so. Before this, customer_id could only be set by an
 * agent or with a matching hash, so rows that have one are verified.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('chat_sessions', (t) => {
    t.boolean('identity_verified').notNullable().defaultTo(false);
  });
  await knex.schema.alterTable('tickets', (t) => {
    t.boolean('identity_verified').notNullable().defaultTo(false);
  });
  await knex('chat_sessions').whereNotNull('customer_id').update({ identity_verified: true });
  await knex('tickets').whereNotNull('customer_id').update({ identity_verified: true });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('tickets', (t) => t.dropColumn('identity_verified'));
  await knex.schema.alterTable('chat_sessions', (t) => t.dropColumn('identity_verified'));
}
