import type { Knex } from 'knex';

/** Prices for other billing periods than a product's own (the original's price_variations). */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('products', (t) => {
    t.jsonb('price_variations').notNullable().defaultTo('[]');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('products', (t) => t.dropColumn('price_variations'));
}
