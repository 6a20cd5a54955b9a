import type { Knex } from 'knex';

/**
 * Foundation: settings, users, customers.
 * Timestamps are timestamptz; every list is ordered by id by default, so the primary key
 * serves the default listing. Trigram indexes keep substring search usable at a million rows.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_trgm');

  await knex.schema.createTable('settings', (t) => {
    t.text('key').primary();
    t.jsonb('value').notNullable();
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('users', (t) => {
    t.bigIncrements('id').primary();
    t.text('username').notNullable();
    t.text('email').notNullable();
    t.text('password_hash').notNullable();
    t.text('display_name').notNullable().defaultTo('');
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE UNIQUE INDEX users_username_lower_uq ON users (lower(username))');
  await knex.raw('CREATE UNIQUE INDEX users_email_lower_uq ON users (lower(email))');
  await knex.raw('CREATE INDEX users_username_trgm ON users USING gin (username gin_trgm_ops)');
  await knex.raw('CREATE INDEX users_email_trgm ON users USING gin (email gin_trgm_ops)');
  await knex.raw('CREATE INDEX users_display_name_trgm ON users USING gin (display_name gin_trgm_ops)');

  await knex.schema.createTable('customers', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('user_id').notNullable().unique().references('id').inTable('users').onDelete('RESTRICT');
    t.text('type').notNullable().defaultTo('customer');
    t.text('email_verification').notNullable().defaultTo('none');
    t.timestamp('date_registered', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_login', { useTz: true }).nullable();
    t.boolean('has_trialed').notNullable().defaultTo(false);
    t.boolean('vip').notNullable().defaultTo(false);
    t.jsonb('ips').notNullable().defaultTo('[]');
    t.text('signup_form').notNullable().defaultTo('by-admin');
    t.text('extra_information').notNullable().defaultTo('');
    t.jsonb('billing_address').notNullable().defaultTo('{}');
    t.jsonb('notes').notNullable().defaultTo('[]');
    t.bigInteger('migrated_from_id').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(
    "ALTER TABLE customers ADD CONSTRAINT customers_email_verification_check CHECK (email_verification IN ('none','pending','verified'))",
  );
  await knex.raw("ALTER TABLE customers ADD CONSTRAINT customers_type_check CHECK (type IN ('customer'))");
  await knex.raw('CREATE INDEX customers_date_created_idx ON customers (date_created, id)');
  await knex.raw('CREATE INDEX customers_email_verification_idx ON customers (email_verification, id)');
  await knex.raw('CREATE INDEX customers_vip_idx ON customers (vip, id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('customers');
  await knex.schema.dropTableIfExists('users');
  await knex.schema.dropTableIfExists('settings');
}
