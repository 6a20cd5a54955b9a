import type { Knex } from 'knex';

/**
 * /register keeps the new account's password hash out of Temporal: the API holds it in
 * `registration_passwords` (keyed by workflow id and request fingerprint) until the saga step
 * that creates the user takes it (src/register/passwords.ts).
 *
 * The request fingerprint becomes an HMAC with a server-side secret. The old unkeyed SHA-256
 * values of bodies that held passwords are cheap offline guessing oracles: they are cleared.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('registration_passwords', (t) => {
    t.text('workflow_id').notNullable();
    t.text('request_hmac').notNullable();
    t.text('password_hash').notNullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['workflow_id', 'request_hmac']);
    t.index(['date_created']);
  });
  await knex.raw('ALTER TABLE registrations RENAME COLUMN request_sha256 TO request_hmac');
  await knex.raw('ALTER TABLE registrations ALTER COLUMN request_hmac DROP NOT NULL');
  await knex('registrations').update({ request_hmac: null });
}

export async function down(knex: Knex): Promise<void> {
  await knex('registrations').whereNull('request_hmac').update({ request_hmac: '' });
  await knex.raw('ALTER TABLE registrations ALTER COLUMN request_hmac SET NOT NULL');
  await knex.raw('ALTER TABLE registrations RENAME COLUMN request_hmac TO request_sha256');
  await knex.schema.dropTableIfExists('registration_passwords');
}
