import type { Knex } from 'knex';

/**
 * Products, memberships, payments, sites and domains.
 * Money is numeric(15,4). Enumerations are CHECK constraints (the API validates first and
 * names the allowed values). References are real foreign keys; deleting a record others
 * depend on is refused (RESTRICT) except a site's domain mappings, which go with the site.
 */
const ts = (t: Knex.CreateTableBuilder, knex: Knex) => {
  t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
};

const check = (table: string, column: string, values: readonly string[]) =>
  `ALTER TABLE ${table} ADD CONSTRAINT ${table}_${column}_check CHECK (${column} IN (${values.map((v) => `'${v}'`).join(',')}))`;

const DURATION_UNITS = ['day', 'week', 'month', 'year'] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('products', (t) => {
    t.bigIncrements('id').primary();
    t.text('slug').notNullable().unique();
    t.text('name').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.specificType('currency', 'char(3)').notNullable().defaultTo('USD');
    t.text('pricing_type').notNullable().defaultTo('paid');
    t.decimal('amount', 15, 4).notNullable().defaultTo(0);
    t.decimal('setup_fee', 15, 4).notNullable().defaultTo(0);
    t.boolean('recurring').notNullable().defaultTo(true);
    t.integer('duration').notNullable().defaultTo(1);
    t.text('duration_unit').notNullable().defaultTo('month');
    t.integer('trial_duration').notNullable().defaultTo(0);
    t.text('trial_duration_unit').notNullable().defaultTo('day');
    t.integer('billing_cycles').notNullable().defaultTo(0);
    t.boolean('active').notNullable().defaultTo(true);
    t.text('type').notNullable().defaultTo('plan');
    t.integer('list_order').notNullable().defaultTo(10);
    t.bigInteger('migrated_from_id').nullable();
    ts(t, knex);
  });
  await knex.raw(check('products', 'pricing_type', ['free', 'paid', 'contact_us', 'pay_what_you_want']));
  await knex.raw(check('products', 'duration_unit', DURATION_UNITS));
  await knex.raw(check('products', 'trial_duration_unit', DURATION_UNITS));
  await knex.raw(check('products', 'type', ['plan', 'package', 'service']));
  await knex.raw('ALTER TABLE products ADD CONSTRAINT products_amounts_check CHECK (amount >= 0 AND setup_fee >= 0)');
  await knex.raw('CREATE INDEX products_type_idx ON products (type, id)');
  await knex.raw('CREATE INDEX products_name_trgm ON products USING gin (name gin_trgm_ops)');

  await knex.schema.createTable('memberships', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('customer_id').notNullable().references('id').inTable('customers').onDelete('RESTRICT');
    t.bigInteger('plan_id').notNullable().references('id').inTable('products').onDelete('RESTRICT');
    t.jsonb('addon_products').notNullable().defaultTo('[]');
    t.specificType('currency', 'char(3)').notNullable().defaultTo('USD');
    t.decimal('initial_amount', 15, 4).notNullable().defaultTo(0);
    t.boolean('recurring').notNullable().defaultTo(true);
    t.boolean('auto_renew').notNullable().defaultTo(false);
    t.integer('duration').notNullable().defaultTo(1);
    t.text('duration_unit').notNullable().defaultTo('month');
    t.decimal('amount', 15, 4).notNullable().defaultTo(0);
    t.timestamp('date_activated', { useTz: true }).nullable();
    t.timestamp('date_trial_end', { useTz: true }).nullable();
    t.timestamp('date_renewed', { useTz: true }).nullable();
    t.timestamp('date_cancellation', { useTz: true }).nullable();
    t.timestamp('date_expiration', { useTz: true }).nullable();
    t.integer('times_billed').notNullable().defaultTo(0);
    t.integer('billing_cycles').notNullable().defaultTo(0);
    t.text('status').notNullable().defaultTo('pending');
    t.text('gateway').notNullable().defaultTo('');
    t.text('gateway_customer_id').notNullable().defaultTo('');
    t.text('gateway_subscription_id').notNullable().defaultTo('');
    t.bigInteger('migrated_from_id').nullable();
    ts(t, knex);
  });
  await knex.raw(check('memberships', 'status', ['pending', 'active', 'trialing', 'expired', 'on-hold', 'cancelled']));
  await knex.raw(check('memberships', 'duration_unit', DURATION_UNITS));
  await knex.raw('CREATE INDEX memberships_customer_idx ON memberships (customer_id, id)');
  await knex.raw('CREATE INDEX memberships_plan_idx ON memberships (plan_id, id)');
  await knex.raw('CREATE INDEX memberships_status_idx ON memberships (status, id)');
  await knex.raw('CREATE INDEX memberships_date_created_idx ON memberships (date_created, id)');

  await knex.schema.createTable('invoice_counter', (t) => {
    t.integer('id').primary();
    t.bigInteger('value').notNullable();
  });
  await knex('invoice_counter').insert({ id: 1, value: 0 });

  await knex.schema.createTable('payments', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('customer_id').notNullable().references('id').inTable('customers').onDelete('RESTRICT');
    t.bigInteger('membership_id').nullable().references('id').inTable('memberships').onDelete('RESTRICT');
    t.bigInteger('product_id').nullable().references('id').inTable('products').onDelete('RESTRICT');
    t.bigInteger('parent_id').nullable().references('id').inTable('payments').onDelete('RESTRICT');
    t.specificType('currency', 'char(3)').notNullable().defaultTo('USD');
    t.decimal('subtotal', 15, 4).notNullable().defaultTo(0);
    t.decimal('refund_total', 15, 4).notNullable().defaultTo(0);
    t.decimal('discount_total', 15, 4).notNullable().defaultTo(0);
    t.decimal('tax_total', 15, 4).notNullable().defaultTo(0);
    t.decimal('total', 15, 4).notNullable().defaultTo(0);
    t.text('status').notNullable().defaultTo('pending');
    t.text('gateway').notNullable().defaultTo('');
    t.text('gateway_payment_id').notNullable().defaultTo('');
    t.jsonb('line_items').notNullable().defaultTo('[]');
    t.bigInteger('invoice_number').nullable().unique();
    t.bigInteger('migrated_from_id').nullable();
    ts(t, knex);
  });
  await knex.raw(check('payments', 'status', ['pending', 'completed', 'refunded', 'partially-refunded', 'partially-paid', 'failed', 'cancelled', 'draft']));
  await knex.raw('CREATE INDEX payments_customer_idx ON payments (customer_id, id)');
  await knex.raw('CREATE INDEX payments_membership_idx ON payments (membership_id, id)');
  await knex.raw('CREATE INDEX payments_status_idx ON payments (status, id)');
  await knex.raw('CREATE INDEX payments_date_created_idx ON payments (date_created, id)');

  await knex.schema.createTable('sites', (t) => {
    t.bigIncrements('id').primary();
    t.text('title').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.text('domain').notNullable();
    t.text('path').notNullable().defaultTo('/');
    t.bigInteger('customer_id').nullable().references('id').inTable('customers').onDelete('RESTRICT');
    t.bigInteger('membership_id').nullable().references('id').inTable('memberships').onDelete('RESTRICT');
    t.bigInteger('template_id').nullable().references('id').inTable('sites').onDelete('RESTRICT');
    t.text('type').notNullable().defaultTo('customer_owned');
    t.boolean('active').notNullable().defaultTo(true);
    t.boolean('public').notNullable().defaultTo(true);
    t.boolean('archived').notNullable().defaultTo(false);
    t.jsonb('site_meta').notNullable().defaultTo('{}');
    t.bigInteger('migrated_from_id').nullable();
    ts(t, knex);
  });
  await knex.raw(check('sites', 'type', ['default', 'site_template', 'customer_owned', 'pending', 'external', 'main', 'demo']));
  await knex.raw('CREATE UNIQUE INDEX sites_domain_path_uq ON sites (lower(domain), path)');
  await knex.raw('CREATE INDEX sites_customer_idx ON sites (customer_id, id)');
  await knex.raw('CREATE INDEX sites_membership_idx ON sites (membership_id, id)');
  await knex.raw('CREATE INDEX sites_type_idx ON sites (type, id)');
  await knex.raw('CREATE INDEX sites_title_trgm ON sites USING gin (title gin_trgm_ops)');
  await knex.raw('CREATE INDEX sites_domain_trgm ON sites USING gin (domain gin_trgm_ops)');

  await knex.schema.createTable('domains', (t) => {
    t.bigIncrements('id').primary();
    t.text('domain').notNullable();
    t.bigInteger('blog_id').nullable().references('id').inTable('sites').onDelete('CASCADE');
    t.bigInteger('customer_id').nullable().references('id').inTable('customers').onDelete('RESTRICT');
    t.boolean('active').notNullable().defaultTo(true);
    t.boolean('primary_domain').notNullable().defaultTo(false);
    t.boolean('secure').notNullable().defaultTo(false);
    t.text('stage').notNullable().defaultTo('checking-dns');
    t.text('workflow_id').nullable();
    t.text('last_error').nullable();
    ts(t, knex);
  });
  await knex.raw(check('domains', 'stage', ['domain-mapping', 'checking-dns', 'checking-ssl-cert', 'done', 'done-without-ssl', 'failed', 'ssl-failed']));
  await knex.raw('CREATE UNIQUE INDEX domains_domain_uq ON domains (lower(domain))');
  // At most one primary domain per site, enforced by the database too.
  await knex.raw('CREATE UNIQUE INDEX domains_one_primary_uq ON domains (blog_id) WHERE primary_domain');
  await knex.raw('CREATE INDEX domains_blog_idx ON domains (blog_id, id)');
  await knex.raw('CREATE INDEX domains_customer_idx ON domains (customer_id, id)');
  await knex.raw('CREATE INDEX domains_stage_idx ON domains (stage, id)');
  await knex.raw('CREATE INDEX domains_domain_trgm ON domains USING gin (domain gin_trgm_ops)');
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['domains', 'sites', 'payments', 'invoice_counter', 'memberships', 'products']) await knex.schema.dropTableIfExists(t);
}
