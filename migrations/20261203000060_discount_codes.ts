import type { Knex } from 'knex';

/**
 * Discount codes (the original's discount_code), and the code a membership and a payment were
 * sold with. `uses` only grows through a guarded UPDATE in the registration's records
 * transaction (uses < max_uses, or max_uses 0 for unlimited), so the checks here hold it.
 * Codes are unique without regard to case (an index on lower(code)).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('discount_codes', (t) => {
    t.bigIncrements('id').primary();
    t.text('name').notNullable();
    t.text('code').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.decimal('value', 15, 4).notNullable().defaultTo(0);
    t.text('type').notNullable().defaultTo('percentage');
    t.decimal('setup_fee_value', 15, 4).notNullable().defaultTo(0);
    t.text('setup_fee_type').notNullable().defaultTo('percentage');
    t.boolean('apply_to_renewals').notNullable().defaultTo(false);
    t.boolean('active').notNullable().defaultTo(true);
    t.integer('max_uses').notNullable().defaultTo(0);
    t.integer('uses').notNullable().defaultTo(0);
    t.timestamp('date_start', { useTz: true }).nullable();
    t.timestamp('date_expiration', { useTz: true }).nullable();
    t.jsonb('allowed_products').notNullable().defaultTo('[]');
    t.boolean('limit_products').notNullable().defaultTo(false);
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw("ALTER TABLE discount_codes ADD CONSTRAINT discount_codes_type_check CHECK (type IN ('percentage','absolute') AND setup_fee_type IN ('percentage','absolute'))");
  await knex.raw('ALTER TABLE discount_codes ADD CONSTRAINT discount_codes_uses_check CHECK (uses >= 0 AND max_uses >= 0)');
  await knex.raw('ALTER TABLE discount_codes ADD CONSTRAINT discount_codes_dates_check CHECK (date_start IS NULL OR date_expiration IS NULL OR date_expiration > date_start)');
  await knex.raw('CREATE UNIQUE INDEX discount_codes_code_unique ON discount_codes (lower(code))');
  await knex.raw('CREATE INDEX discount_codes_date_created_idx ON discount_codes (date_created, id)');
  await knex.schema.alterTable('memberships', (t) => t.text('discount_code').nullable());
  await knex.schema.alterTable('payments', (t) => t.text('discount_code').nullable());
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('payments', (t) => t.dropColumn('discount_code'));
  await knex.schema.alterTable('memberships', (t) => t.dropColumn('discount_code'));
  await knex.schema.dropTable('discount_codes');
}
