import type { Knex } from 'knex';

/** When a domain check that failed a try tries again (the workflow's durable sleep); null otherwise. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('domains', (t) => {
    t.timestamp('next_check_at', { useTz: true }).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('domains', (t) => {
    t.dropColumn('next_check_at');
  });
}
