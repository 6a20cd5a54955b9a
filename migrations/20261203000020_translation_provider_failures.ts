import type { Knex } from 'knex';

/**
 * The AI provider's error budget, apart from infrastructure retries: failures of the provider
 * (an error answer, a timeout, a broken translation) counted per job (`provider_failures`,
 * against TRANSLATION_AI_ERROR_BUDGET) and for the batch in hand (`batch_provider_failures`,
 * against TRANSLATION_AI_MAX_TRIES; back to 0 when a batch is stored). A worker cancelled or
 * killed mid-batch counts in neither.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('translation_jobs', (t) => {
    t.integer('provider_failures').notNullable().defaultTo(0);
    t.integer('batch_provider_failures').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('translation_jobs', (t) => {
    t.dropColumn('provider_failures');
    t.dropColumn('batch_provider_failures');
  });
}
