import type { Knex } from 'knex';

/**
 * Two indexes of webhook_deliveries:
 * - (event_id): deleting an event (retention, pruneEvents) cascades to its deliveries through
 *   the foreign key, and PostgreSQL finds them by event_id alone; the unique (webhook_id,
 *   event_id) index cannot serve that, so every batch of deleted events scanned the whole table.
 * - (webhook_id, event_id, id) of the pending ones: a shard workflow past its bound
 *   (WEBHOOK_SHARD_MAX_QUEUED) reads its webhook's oldest pending deliveries in that order
 *   (pendingShardDeliveries) without going through the delivered ones.
 * CONCURRENTLY would not lock writes, but cannot run in the migration's transaction; the
 * table's writes wait for the build (seconds per million rows).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id)');
  await knex.raw("CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (webhook_id, event_id, id) WHERE status = 'pending'");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX webhook_deliveries_pending_idx');
  await knex.raw('DROP INDEX webhook_deliveries_event_idx');
}
