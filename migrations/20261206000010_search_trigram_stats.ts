import type { Knex } from 'knex';

/**
 * The common trigrams of each searched table (src/db/search-trigrams.ts): one row per table,
 * written by whichever API process samples the table, read by every replica. A search leaves
 * these trigrams out of its trigram index scan. `table_rows`: the table's size (the planner's
 * count) when sampled; a table grown well past it is sampled again.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE search_trigram_stats (
    tbl text PRIMARY KEY,
    trigrams text[] NOT NULL,
    sampled_rows integer NOT NULL CHECK (sampled_rows >= 0),
    table_rows double precision NOT NULL CHECK (table_rows >= 0),
    sampled_at timestamptz NOT NULL
  )`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE search_trigram_stats');
}
