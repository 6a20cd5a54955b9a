import type { Knex } from 'knex';

/**
 * The chat sessions' customer_email filter compares case-insensitively, as the customers'
 * email and username filters do (`lower(column) = lower(?)`): this index serves it. Those two
 * are served by the unique indexes on users (lower(email)) and (lower(username)).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX chat_sessions_customer_email_lower_idx ON chat_sessions (lower(customer_email), id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS chat_sessions_customer_email_lower_idx');
}
