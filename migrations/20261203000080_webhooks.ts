import type { Knex } from 'knex';

/**
 * Webhooks (the original's webhook model, with a signing secret and a description), their
 * deliveries (one per webhook and event: its id is the stable `webhook-id` every retry
 * sends), the log of every attempt, and the dispatch cursor the relays share.
 *
 * events.txid: the transaction that wrote the event. Event ids are taken before their
 * transactions commit, so a later id can become visible before an earlier one; the dispatch
 * relay reads events in (txid, id) order, only below the oldest transaction of the database
 * still running, so it never passes over an event that commits late.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id()');
  await knex.raw('CREATE INDEX events_txid_idx ON events (txid, id)');
  // Wakes the dispatch relays when events commit (src/webhooks/dispatch.ts); a sweep catches what a lost listener missed.
  await knex.raw(`CREATE FUNCTION hostflow_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_notify('hostflow_events', ''); RETURN NULL; END $$`);
  await knex.raw('CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION hostflow_events_notify()');

  await knex.schema.createTable('webhooks', (t) => {
    t.bigIncrements('id').primary();
    t.text('name').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.text('webhook_url').notNullable();
    t.text('event').notNullable();
    t.text('integration').notNullable().defaultTo('manual');
    t.boolean('active').notNullable().defaultTo(true);
    t.bigInteger('event_count').notNullable().defaultTo(0);
    t.timestamp('date_last_failed', { useTz: true }).nullable();
    // Since when every attempt has failed (null after a success): the disable rule's clock.
    t.timestamp('failing_since', { useTz: true }).nullable();
    t.text('secret').notNullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE INDEX webhooks_active_event_idx ON webhooks (event) WHERE active');

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('webhook_id').notNullable().references('id').inTable('webhooks').onDelete('CASCADE');
    // Deliveries go with their event when retention deletes it.
    t.bigInteger('event_id').notNullable().references('id').inTable('events').onDelete('CASCADE');
    t.text('object_type').notNullable();
    t.bigInteger('object_id').nullable();
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error').nullable();
    // When the delivery workflow was last told of it (null: a relay must still tell it).
    t.timestamp('signalled_at', { useTz: true }).nullable();
    t.timestamp('date_delivered', { useTz: true }).nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['webhook_id', 'event_id'], { indexName: 'webhook_deliveries_webhook_event_unique' });
  });
  await knex.raw("ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending','delivered','failed'))");
  await knex.raw('CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, id)');
  await knex.raw('CREATE INDEX webhook_deliveries_unsignalled_idx ON webhook_deliveries (id) WHERE signalled_at IS NULL');

  await knex.schema.createTable('webhook_delivery_attempts', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('delivery_id').notNullable().references('id').inTable('webhook_deliveries').onDelete('CASCADE');
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('status_code').nullable();
    // The failure without an answer (timeout, refused, connect, dns, ...); null when there was one.
    t.text('error').nullable();
    t.integer('latency_ms').notNullable();
    t.text('response_excerpt').notNullable().defaultTo('');
  });
  await knex.raw('CREATE INDEX webhook_delivery_attempts_delivery_idx ON webhook_delivery_attempts (delivery_id, id)');

  // One row: the last event (txid, id) handed to the webhooks; locked by the relay's pass.
  await knex.schema.createTable('webhook_dispatch', (t) => {
    t.integer('id').primary();
    t.specificType('last_txid', 'xid8').notNullable();
    t.bigInteger('last_event_id').notNullable();
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  // Events written before webhooks existed are not dispatched.
  await knex.raw(`INSERT INTO webhook_dispatch (id, last_txid, last_event_id)
    SELECT 1, coalesce(e.txid, '0'::xid8), coalesce(e.id, 0) FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT txid, id FROM events ORDER BY txid DESC, id DESC LIMIT 1) e ON true`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_dispatch');
  await knex.schema.dropTable('webhook_delivery_attempts');
  await knex.schema.dropTable('webhook_deliveries');
  await knex.schema.dropTable('webhooks');
  await knex.raw('DROP TRIGGER events_notify ON events');
  await knex.raw('DROP FUNCTION hostflow_events_notify()');
  await knex.raw('ALTER TABLE events DROP COLUMN txid');
}
