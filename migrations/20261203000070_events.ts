import type { Knex } from 'knex';

/**
 * The event log (the original's event model): one row per state change an integrator cares
 * about, written in the same transaction as the change (src/events/record.ts), so the change
 * and its event exist together or not at all. Rows are only inserted and, past the retention
 * time, deleted oldest first. The indexes serve the list's filters in id order: slug, one
 * object's events, and date ranges (retention deletes by date_created too).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('events', (t) => {
    t.bigIncrements('id').primary();
    t.text('slug').notNullable();
    t.smallint('severity').notNullable().defaultTo(3);
    t.text('initiator').notNullable().defaultTo('system');
    t.bigInteger('author_id').nullable();
    t.text('object_type').notNullable();
    t.bigInteger('object_id').nullable();
    t.jsonb('payload').notNullable().defaultTo('{}');
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('ALTER TABLE events ADD CONSTRAINT events_severity_check CHECK (severity BETWEEN 1 AND 5)');
  await knex.raw("ALTER TABLE events ADD CONSTRAINT events_initiator_check CHECK (initiator IN ('system','manual'))");
  await knex.raw('CREATE INDEX events_slug_idx ON events (slug, id)');
  await knex.raw('CREATE INDEX events_object_idx ON events (object_type, object_id, id)');
  await knex.raw('CREATE INDEX events_date_created_idx ON events (date_created, id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('events');
}
